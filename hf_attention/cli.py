"""The `hf-attention` command line. Each subcommand lives in the module of its feature and registers itself here."""

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    """The parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="hf-attention", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    # Imported lazily so that `hf-attention --help` stays fast and one feature's imports never break another's.
    from .convert import add_convert_command
    from .demo import add_demo_command
    from .visualize import add_attention_map_command

    add_convert_command(subparsers)
    add_demo_command(subparsers)
    add_attention_map_command(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `hf-attention` script."""
    args = build_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
