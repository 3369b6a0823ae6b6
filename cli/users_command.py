"""``users add``: a server user and their bearer token (``tools.access.users``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from tools.access.users import USERS_FILE_ENV, add_user
from tools.errors import ConfigError


def register(subparsers: Any) -> None:
    users = subparsers.add_parser("users", help="server users (bearer tokens and groups)")
    users_sub = users.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    add = users_sub.add_parser(
        "add", help="add a user (or give them a new token); prints the token once"
    )
    add.add_argument("identity", help="the user's name (user:NAME in access lists)")
    add.add_argument("--groups", default="", help="comma-separated groups, e.g. hr,finance")
    add.add_argument("--file", help=f"the users file (default: ${USERS_FILE_ENV})")
    add.set_defaults(func=cmd_users_add)


def cmd_users_add(args: argparse.Namespace) -> int:
    path = args.file or os.environ.get(USERS_FILE_ENV, "").strip()
    if not path:
        raise ConfigError(f"name the users file with --file or ${USERS_FILE_ENV}")
    groups = sorted({g.strip() for g in args.groups.split(",") if g.strip()})
    token = add_user(Path(path).expanduser(), args.identity, groups)
    print(f"user {args.identity} (groups: {', '.join(groups) or 'none'}) in {path}")
    print(f"token (shown once; send it as 'Authorization: Bearer <token>'): {token}")
    return 0
