"""The wheel installs the `trueneg` command: the release binary."""

import subprocess

import trueneg


def test_the_wheel_installs_the_command_of_the_same_version(command):
    out = subprocess.run([command, "--version"], check=True, capture_output=True, text=True)
    assert out.stdout.split()[:2] == ["trueneg", trueneg.__version__]


def test_the_command_says_what_a_bad_flag_is(command):
    out = subprocess.run([command, "lexicon", "build", "--no-such-flag"], capture_output=True,
                         text=True)
    assert out.returncode != 0
    assert "--no-such-flag" in out.stderr
