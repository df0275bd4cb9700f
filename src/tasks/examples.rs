//! The examples the tasks' readers give: a sentence(-pair) task's row with its label, and a
//! SQuAD question.

/// A label: a class index, or a real score (STS-B).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Label {
    Class(usize),
    Score(f64),
}

/// A SQuAD question with its paragraph and gold answers.
#[derive(Clone, Debug, PartialEq)]
pub struct SquadExample {
    /// The article's title (kept so that a transformed copy keeps every article).
    pub title: String,
    pub id: String,
    pub question: String,
    pub context: String,
    /// (answer text, character offset in `context`, as `answer_start` in the file).
    pub answers: Vec<(String, usize)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GlueExample {
    /// The row's id in the file (`index` column, else the line number).
    pub id: String,
    pub text_a: String,
    pub text_b: Option<String>,
    pub label: Option<Label>,
}
