"""The `hf-attention` command line. Each subcommand lives in the module of its feature and registers itself here.

Bad input (a ValueError or an OSError from a subcommand) ends the command with a one-line `error: ...` on stderr and
exit status 1, like argparse's own usage errors (status 2); anything else is a bug and keeps its traceback.
"""

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    """The parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="hf-attention", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    # Imported lazily so that `hf-attention --help` stays fast and one feature's imports never break another's.
    from ..conversion.from_hf import add_convert_command
    from ..conversion.to_hf import add_export_command
    from ..inspection.explorer import add_explore_command
    from ..inspection.heatmaps import add_attention_map_command
    from .demo import add_demo_command
    from .refresh_code import add_refresh_code_command

    add_convert_command(subparsers)
    add_demo_command(subparsers)
    add_attention_map_command(subparsers)
    add_explore_command(subparsers)
    add_export_command(subparsers)
    add_refresh_code_command(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `hf-attention` script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except (ValueError, OSError) as error:
        print(f"{parser.prog} {args.command}: error: {one_line(error)}", file=sys.stderr)
        return 1


def one_line(error: BaseException) -> str:
    """The message of `error` on one line (transformers' messages span several)."""
    message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return message or type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
