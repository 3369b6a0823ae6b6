"""``users add|list|remove|disable|enable|rotate|passwd``: the server's users, their tokens
and passwords (``tools.access.users``, ``tools.access.passwords``). Each change replaces the file atomically; a running server
sees it on its next request, no restart."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.access.passwords import set_password
from tools.access.users import USERS_FILE_ENV, add_user
from tools.access.users_file import (
    list_users,
    remove_user,
    require_file,
    rotate_token,
    set_disabled,
)
from tools.errors import InputError

TOKEN_LINE = "token (shown once; send it as 'Authorization: Bearer <token>'): {}"


def _action(
    sub: Any, name: str, help_: str, func: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_)
    if name != "list":
        parser.add_argument("identity", help="the user's name (user:NAME in access lists)")
    parser.add_argument("--file", help=f"the users file (default: ${USERS_FILE_ENV})")
    parser.set_defaults(func=func)
    return parser


def register(subparsers: Any) -> None:
    users = subparsers.add_parser("users", help="server users (bearer tokens and groups)")
    sub = users.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    add = _action(sub, "add", "add a user (or replace one); prints the token once", cmd_add)
    add.add_argument("--groups", default="", help="comma-separated groups, e.g. hr,finance")
    add.add_argument("--admin", action="store_true", help="may administer the server")
    add.add_argument(
        "--sso", action="store_true", help="signs in with single sign-on (OpenID Connect)"
    )
    _action(sub, "list", "list the users (never their tokens)", cmd_list)
    _action(sub, "remove", "remove a user (their token stops working)", cmd_remove)
    _action(sub, "disable", "refuse a user's token until enabled again", cmd_disable)
    _action(sub, "enable", "accept a disabled user's token again", cmd_enable)
    _action(sub, "rotate", "give a user a new token (the old one stops working)", cmd_rotate)
    _action(sub, "passwd", "set a user's password, read from standard input", cmd_passwd)


def _path(args: argparse.Namespace) -> Path:
    """The users file, absolute: a relative one names a file under the working directory,
    so the messages say which (the server may read another one)."""
    given = require_file(args.file or os.environ.get(USERS_FILE_ENV, "").strip())
    return given.absolute()


def _warn_if_new(args: argparse.Namespace, path: Path) -> None:
    """A relative path used from another folder silently starts a second users file: say so."""
    given = args.file or os.environ.get(USERS_FILE_ENV, "").strip()
    if not Path(given).expanduser().is_absolute() and not path.exists():
        print(
            f"hybrid-rag: warning: {given!r} is relative and names no existing file here: "
            f"creating a new users file {path} (give an absolute path to use another one)",
            file=sys.stderr,
        )


def cmd_add(args: argparse.Namespace) -> int:
    path = _path(args)
    _warn_if_new(args, path)
    groups = sorted({g.strip() for g in args.groups.split(",") if g.strip()})
    token = add_user(path, args.identity, groups, admin=args.admin, sso=args.sso)
    role = ", admin" if args.admin else ""
    print(f"user {args.identity} (groups: {', '.join(groups) or 'none'}{role}) in {path}")
    print(TOKEN_LINE.format(token))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    path = _path(args)
    users = list_users(path)
    for user in users:
        flags = [
            f
            for f, on in (("admin", user.admin), ("disabled", user.disabled),
                          ("password", bool(user.password)), ("sso", user.sso))
            if on
        ]  # fmt: skip
        groups = ",".join(user.groups) or "-"
        print(f"{user.identity}\tgroups: {groups}" + (f"\t{' '.join(flags)}" if flags else ""))
    print(f"{len(users)} user(s) in {path}")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    path = _path(args)
    remove_user(path, args.identity)
    print(f"user {args.identity} removed from {path}; their token is refused from the next request")
    return 0


def cmd_disable(args: argparse.Namespace) -> int:
    path = _path(args)
    set_disabled(path, args.identity, True)
    print(f"user {args.identity} disabled in {path}; their token is refused until 'users enable'")
    return 0


def cmd_enable(args: argparse.Namespace) -> int:
    path = _path(args)
    set_disabled(path, args.identity, False)
    print(f"user {args.identity} enabled in {path}")
    return 0


def cmd_rotate(args: argparse.Namespace) -> int:
    path = _path(args)
    token = rotate_token(path, args.identity)
    print(
        f"user {args.identity}: new token in {path}; the old one is refused from the next request"
    )
    print(TOKEN_LINE.format(token))
    return 0


def _read_password() -> str:
    """A terminal is asked twice, without echo; a pipe gives its first line (a script's
    ``printf '%s\\n' "$PW" | hybrid-rag users passwd NAME``), never an argument ps shows."""
    if sys.stdin.isatty():
        first = getpass.getpass("new password: ")
        if getpass.getpass("again: ") != first:
            raise InputError("the two passwords differ: nothing changed")
        return first
    return sys.stdin.readline().rstrip("\r\n")


def cmd_passwd(args: argparse.Namespace) -> int:
    set_password(_path(args), args.identity, _read_password())
    print(f"user {args.identity}: password set; their browser sessions end at once")
    return 0
