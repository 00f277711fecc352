"""Bad command-line input: a one-line `error: ...` on stderr naming the problem, a non-zero exit status, no traceback,
and nothing lost: no checkpoint overwritten or deleted, no gigabyte-sized figure, no network call for a local path."""

from hf_attention.cli import main


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `hf-attention argv`."""
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's usage errors
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_error(code, err: str, words: list[str], status: int = 1) -> None:
    assert code == status, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0] == err.splitlines()[-1], err
    assert errors[0].startswith("hf-attention ")
    for word in words:
        assert word in errors[0], (word, errors[0])


# ---------------------------------------------------------------------------------------------------------------------
# demo


def test_demo_output_dir_under_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    code, _, err = run(capsys, ["demo", "--output-dir", str(tmp_path / "afile" / "demo")])
    assert_error(code, err, ["--output-dir", "afile is a file, not a folder"])
