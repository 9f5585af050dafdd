"""`weave COMMAND --help` answers the question: every argument of every command says what it is."""

from __future__ import annotations

import argparse

from orchestrator import cli


def _arguments(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _arguments(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


def test_every_argument_of_every_command_has_help_text():
    arguments = list(_arguments(cli.build_parser(), ("weave",)))
    assert len(arguments) > 100  # the walk reached the subcommands
    silent = [f"{' '.join(path)} {'/'.join(a.option_strings) or a.dest}" for path, a in arguments if not a.help]
    assert silent == []
