"""deploy/compose.yaml and deploy/Dockerfile, checked without Docker.

Docker is not available to the tests, so the files are checked statically: the compose
file validates against the Compose Specification's JSON schema (vendored under
tests/compose_spec/, Apache-2.0); every service's command is a program the test helpers
start on loopback (``uvicorn aegra_api.main:app`` in tests/test_production.py, ``chroma
run`` and ``postgres`` in tests/servers.py, the profile postgres-kb's ``pg_basebackup``
and ``postgres`` settings in tests/pg_cluster.py, ``redis-server`` in
tests/redis_server.py, the ``hybrid-rag`` CLI), with options those helpers pass too; the
profile is a primary and two streaming replicas the app servers reach through the two
agreed variables; by default only the API
publishes a port, on 127.0.0.1, and it needs the users file; every service has a
healthcheck; secrets come from an ignored env file; the Dockerfile copies no secret and
runs as a non-root user.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "deploy" / "compose.yaml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
SCHEMA = ROOT / "tests" / "compose_spec" / "compose-spec.json"
# program (and sub-command) -> the helpers that start it in the tests
HELPERS = {
    ("uvicorn", "aegra_api.main:app"): (ROOT / "tests" / "production_server.py",),
    ("chroma", "run"): (ROOT / "tests" / "servers.py",),
    ("postgres",): (ROOT / "tests" / "servers.py", ROOT / "tests" / "pg_cluster.py"),
    ("pg_basebackup",): (ROOT / "tests" / "pg_cluster.py",),
    ("redis-server",): (ROOT / "tests" / "redis_server.py",),
}
# The knowledge base in PostgreSQL (issue 44): the profile, its services, and the two
# variables the application reads (agreed names: the primary; the replicas, comma-separated).
KB_PROFILE = "postgres-kb"
KB_PRIMARY, KB_REPLICAS = "kb-primary", ("kb-replica1", "kb-replica2")
KB_ENV = ("HYBRID_RAG_KB_DATABASE_URL", "HYBRID_RAG_KB_READ_URLS")
_VARIABLE = re.compile(r"\$\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return data


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?error}``."""

    def one(m: re.Match[str]) -> str:
        name, op, arg = m["name"], m["op"] or "", m["arg"] or ""
        if op in (":-", ":?") and not env.get(name):
            if op == ":?":
                raise KeyError(f"{name}: {arg}")
            return arg
        if op in ("-", "?") and name not in env:
            if op == "?":
                raise KeyError(f"{name}: {arg}")
            return arg
        return env.get(name, "")

    return _VARIABLE.sub(one, value)


def argv(service: dict[str, Any]) -> list[str]:
    entry = service.get("entrypoint") or []
    command = service.get("command") or []
    parts = [*entry, *command]
    return shlex.split(parts) if isinstance(parts, str) else [str(p) for p in parts]


def options(args: list[str]) -> list[str]:
    """``--flag`` tokens and the setting names of ``-c name=value``."""
    found: list[str] = []
    for i, token in enumerate(args):
        if token == "-c" and i + 1 < len(args):
            found.append(args[i + 1].split("=", 1)[0] + "=")
        elif token.startswith("--"):
            found.append(token.split("=", 1)[0])
    return found


def test_compose_validates_against_the_compose_specification() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema).validate(compose())
    bad = {**compose(), "services": {"api": {"ports": [{"published": "x", "oops": 1}]}}}
    with pytest.raises(jsonschema.ValidationError):  # the schema does reject mistakes
        jsonschema.Draft7Validator(schema).validate(bad)


def assert_started_by_a_test(name: str, args: list[str]) -> None:
    """``args`` is a command a test helper runs, with options that helper passes too (a
    setting ``-c name=value`` may be a key of the helper's settings dict)."""
    key = next((k for k in HELPERS if tuple(args[: len(k)]) == k), None)
    assert key is not None, f"service {name}: {args[0]} is not started by any test"
    helper = "".join(path.read_text(encoding="utf-8") for path in HELPERS[key])
    for option in options(args[len(key) :]):
        quoted = f'"{option}' if option.endswith("=") else f'"{option}"'
        setting = option.endswith("=") and f'"{option[:-1]}":' in helper
        assert quoted in helper or setting, (
            f"service {name}: {option} is not used by {HELPERS[key]}"
        )


def replica_script(service: dict[str, Any]) -> list[list[str]]:
    """A replica's ``sh -c`` script as its command lines (``$$`` is compose's ``$``)."""
    args = argv(service)
    assert args[:2] == ["sh", "-c"] and len(args) == 3, args
    lines = [line.strip() for line in args[2].replace("$$", "$").splitlines()]
    return [
        shlex.split(line.split(" || ")[0]) for line in lines if line.startswith(("pg_", "exec"))
    ]


def test_every_service_runs_a_command_the_tests_run() -> None:
    services = compose()["services"]
    assert set(services) == {"api", "chroma", "postgres", "redis", "cli", KB_PRIMARY, *KB_REPLICAS}
    for name, service in services.items():
        if name in KB_REPLICAS:
            for line in replica_script(service):
                assert_started_by_a_test(name, line[1:] if line[0] == "exec" else line)
            continue
        args = argv(service)
        assert args, f"service {name} names no command"
        if args[0] == "hybrid-rag":
            from cli.main import build_parser

            build_parser().parse_args(args[1:])  # a real CLI command line
            continue
        assert_started_by_a_test(name, args)


def test_by_default_only_the_api_publishes_a_port_on_loopback() -> None:
    env = {"POSTGRES_PASSWORD": "x"}  # the only variable deploy/.env must set
    published = {
        name: [interpolate(str(p), env) for p in service.get("ports", [])]
        for name, service in compose()["services"].items()
    }
    assert published.pop("api") == ["127.0.0.1:2024:8000"]
    assert not any(published.values()), published
    configured = interpolate(
        compose()["services"]["api"]["ports"][0], {"HYBRID_RAG_BIND": "0.0.0.0"}
    )
    assert configured == "0.0.0.0:2024:8000"


def test_the_api_needs_the_users_file_and_its_secrets_from_deploy_env() -> None:
    api = compose()["services"]["api"]
    env = api["environment"]
    users = interpolate(env["HYBRID_RAG_USERS_FILE"], {})
    mount = next(v for v in api["volumes"] if isinstance(v, dict) and v["type"] == "bind")
    assert users.startswith(mount["target"] + "/") and mount["read_only"] is True
    assert mount["bind"]["create_host_path"] is False  # a missing folder is an error
    assert interpolate(env["HYBRID_RAG_OPEN"], {}) == ""  # open only when asked
    with pytest.raises(KeyError, match="POSTGRES_PASSWORD"):
        interpolate(env["DATABASE_URL"], {})  # no password, no start
    for service in compose()["services"].values():  # no password written in compose.yaml
        for key, value in (service.get("environment") or {}).items():
            if "PASSWORD" in key:
                assert str(value).startswith("${"), key
    assert re.search(r"://hybrid:\$\{POSTGRES_PASSWORD", env["DATABASE_URL"])
    assert "POSTGRES_PASSWORD=\n" in (ROOT / "deploy" / "env.example").read_text(encoding="utf-8")
    patterns = dockerignore()
    assert docker_excluded("deploy/.env", patterns) and docker_excluded("users.json", patterns)
    gitignore = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert ".env" in gitignore and "users.json" in gitignore


def test_every_service_has_a_healthcheck_and_data_is_on_named_volumes() -> None:
    data = compose()
    for name, service in data["services"].items():
        assert service.get("healthcheck", {}).get("test"), f"service {name}: no healthcheck"
    named = set(data["volumes"])
    kb = [(name, "/var/lib/postgresql") for name in (KB_PRIMARY, *KB_REPLICAS)]  # PostgreSQL 18
    for name, where in (("chroma", "/chroma"), ("postgres", "/var/lib/postgresql/data"), *kb):
        volumes = data["services"][name]["volumes"]
        assert f"{name}:{where}" in volumes and name in named


def test_the_postgres_kb_profile_is_a_primary_and_two_streaming_replicas() -> None:
    data = compose()
    services = data["services"]
    profiled = {name for name, service in services.items() if service.get("profiles")}
    assert profiled == {"cli", KB_PRIMARY, *KB_REPLICAS}
    for name in (KB_PRIMARY, *KB_REPLICAS):
        assert services[name]["profiles"] == [KB_PROFILE]
        assert services[name]["image"] == "pgvector/pgvector:pg18"
        assert (
            services[name]["volumes"] == [f"{name}:/var/lib/postgresql"] and name in data["volumes"]
        )
        assert services[name]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    primary = services[KB_PRIMARY]
    assert "wal_level=replica" in argv(primary) and primary["environment"]["POSTGRES_DB"] == "kb"
    [init] = primary["configs"]
    assert init["target"].startswith("/docker-entrypoint-initdb.d/")
    script = data["configs"][init["source"]]["content"]
    assert "host replication $$POSTGRES_USER all scram-sha-256" in script  # replicas may stream
    assert "CREATE EXTENSION IF NOT EXISTS vector" in script
    slots = set()
    for name in KB_REPLICAS:
        replica = services[name]
        assert replica["depends_on"] == {KB_PRIMARY: {"condition": "service_healthy"}}
        backup, server = replica_script(replica)
        assert backup[:3] == ["pg_basebackup", "-h", KB_PRIMARY]
        assert {"-R", "-C", "-S"} <= set(backup) and backup[backup.index("-X") + 1] == "stream"
        assert backup[backup.index("-S") + 1] == "$KB_SLOT"
        slots.add(replica["environment"]["KB_SLOT"])
        assert server[:2] == ["exec", "postgres"] and "hot_standby=on" in server
        assert replica["environment"]["PGPASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert len(slots) == len(KB_REPLICAS)  # a replication slot each


def test_the_app_servers_read_the_postgres_kb_from_the_agreed_variables() -> None:
    example = (ROOT / "deploy" / "env.example").read_text(encoding="utf-8")
    kb_lines = re.findall(
        r"^# (COMPOSE_PROFILES|CHROMA_HOST|HYBRID_RAG_KB_\w+)=(.*)$", example, re.M
    )
    kb_env = dict(kb_lines)
    assert kb_env["COMPOSE_PROFILES"] == KB_PROFILE
    hosts = {k: [url.split("@")[1].split("/")[0] for url in kb_env[k].split(",")] for k in KB_ENV}
    assert hosts == {
        KB_ENV[0]: [f"{KB_PRIMARY}:5432"],
        KB_ENV[1]: [f"{r}:5432" for r in KB_REPLICAS],
    }
    services = compose()["services"]
    for name in ("api", "cli"):
        env = services[name]["environment"]
        # By default the Chroma server; with deploy/.env's lines, PostgreSQL and no Chroma
        # host (the application refuses both at once).
        assert [interpolate(env[k], {}) for k in ("CHROMA_HOST", *KB_ENV)] == ["chroma", "", ""]
        applied = [interpolate(env[k], kb_env) for k in ("CHROMA_HOST", *KB_ENV)]
        assert applied == ["", kb_env[KB_ENV[0]], kb_env[KB_ENV[1]]]
        for kb in (KB_PRIMARY, *KB_REPLICAS):  # waited for when the profile runs them
            assert services[name]["depends_on"][kb] == {
                "condition": "service_healthy",
                "required": False,
            }
    code = "".join(
        path.read_text(encoding="utf-8")
        for package in ("cli", "server", "run", "tools")
        for path in (ROOT / package).rglob("*.py")
    )
    read = set(re.findall(r"HYBRID_RAG_KB_\w+", code))
    if read:  # the PostgreSQL store is merged: these are the names it reads
        assert set(KB_ENV) <= read, read


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    found = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_the_dockerfile_copies_no_secret_pins_its_install_and_runs_as_non_root() -> None:
    steps = dockerfile_instructions()
    assert steps[0][0] == "FROM"
    copied = [arg for op, arg in steps if op in ("COPY", "ADD")]
    sources = [s for arg in copied for s in shlex.split(arg)[:-1] if not s.startswith("--")]
    for source in sources:
        assert not re.search(r"(^|/)(\.env|users\.json|.*\.(pem|key))$|^\.$", source), source
    for op, arg in steps:
        if op in ("ENV", "ARG"):
            assert not re.search(r"PASSWORD|SECRET|TOKEN|API_KEY", arg, re.IGNORECASE), arg
    install = next(arg for op, arg in steps if op == "RUN" and "pip install" in arg)
    assert re.search(r"-c \S*constraints\.txt", install) and "[postgres,redis,server]" in install
    users = [arg for op, arg in steps if op == "USER"]
    last_run = max(i for i, (op, _) in enumerate(steps) if op == "RUN")
    last_user = max(i for i, (op, _) in enumerate(steps) if op == "USER")
    assert users and users[-1] not in ("root", "0") and last_user > last_run


def wheel_packages() -> list[str]:
    """The top-level packages pyproject.toml puts in the wheel (``server*`` -> ``server``)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]]


def test_the_image_installs_the_wheel_built_from_every_package_it_holds() -> None:
    # Issue 53: the image copied the source folders one by one and left out web/, so the
    # installed server died on "No module named 'web'" (compose up: a crash loop) while CI
    # built from the whole checkout. Now a build stage makes the wheel with the script CI
    # uses, and the runtime stage installs that wheel and copies no source.
    steps = dockerfile_instructions()
    stages = [i for i, (op, _) in enumerate(steps) if op == "FROM"]
    assert len(stages) == 2, "a wheel-building stage, then the runtime stage"
    build, runtime = steps[stages[0] : stages[1]], steps[stages[1] :]
    copied = [s for op, a in build if op == "COPY" for s in shlex.split(a)[:-1]]
    missing = [p for p in wheel_packages() if p not in copied]
    assert not missing, f"the build stage does not copy {missing}: the wheel would lack them"
    assert "pyproject.toml" in copied and "deploy/build-wheel" in copied
    assert any(op == "RUN" and a.startswith("deploy/build-wheel ") for op, a in build)
    runtime_copies = [a for op, a in runtime if op in ("COPY", "ADD")]
    for arg in runtime_copies:  # the wheel from the build stage and the pins, nothing else
        assert arg.startswith("--from=") or shlex.split(arg)[0] == "constraints.txt", arg
    install = next(a for op, a in runtime if op == "RUN" and "pip install" in a)
    assert "hybrid_rag-*.whl)[postgres,redis,server]" in install
    assert "python -m server.aegra_config --path" in install  # the config is the package's
    assert "import server.webapp" in install  # the import that failed, at build time
    env = " ".join(a for op, a in runtime if op == "ENV")
    assert "AEGRA_CONFIG=/usr/local/lib/python3.11/site-packages/server/aegra.json" in env
    assert steps[stages[1]][1].split()[0] == steps[0][1].split()[0]  # the same Python image


def test_the_wheel_holds_the_page_the_config_and_imports_without_the_checkout(
    tmp_path: Path,
) -> None:
    # The artifact itself (deploy/build-wheel, as the image and .ci build it), unpacked as
    # pip installs it and imported from an empty folder: no checkout on sys.path.
    import os
    import subprocess
    import sys
    import zipfile

    env = {**os.environ, "PYTHON": sys.executable}
    built = subprocess.run([str(ROOT / "deploy" / "build-wheel"), str(tmp_path / "dist")],
                           env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stderr
    wheel = Path(built.stdout.strip().splitlines()[-1])
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "web", "prompts", "server"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert "web/index.html" in names and "server/aegra.json" in names
    assert {"web/vendor/marked.esm.js", "web/vendor/purify.es.js"} <= names
    assert {"web/LICENSES/marked.LICENSE", "web/LICENSES/dompurify.LICENSE"} <= names
    assert not [p for p in tracked if p not in names], "tracked files left out of the wheel"
    assert any(n.startswith("tools/kb/search/answerability_params/") for n in names)
    assert not [n for n in names if n.startswith(("tests/", "bench/", "build/"))]
    site, empty = tmp_path / "site", tmp_path / "empty"
    zipfile.ZipFile(wheel).extractall(site)
    empty.mkdir()
    config = json.loads((site / "server" / "aegra.json").read_text(encoding="utf-8"))
    paths = [*config["graphs"].values(), config["auth"]["path"], config["http"]["app"]]
    for spec in paths:  # Aegra resolves them against the config's folder
        assert (site / "server" / spec.partition(":")[0]).is_file(), spec
    code = "import server, web, server.webapp; print(server.__file__); print(web.__file__)"
    ran = subprocess.run([sys.executable, "-c", code], cwd=empty, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(site)}, timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert all(line.startswith(str(site)) for line in ran.stdout.split()), ran.stdout


# --- the image's build context (.dockerignore) -----------------------------------------


def docker_excluded(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule for one context-relative path: the last pattern that
    matches it or one of its parent folders decides; ``!`` re-includes; ``*`` stays within
    a path segment, ``**`` spans segments."""

    def regex(pattern: str) -> re.Pattern[str]:
        out = ""
        for part in re.split(r"(\*\*/?|\*|\?)", pattern.strip("/")):
            if part in ("**", "**/"):
                out += "(?:.*/)?" if part == "**/" else ".*"
            elif part == "*":
                out += "[^/]*"
            elif part == "?":
                out += "[^/]"
            else:
                out += re.escape(part)
        return re.compile(out)

    prefixes = ["/".join(path.split("/")[: i + 1]) for i in range(path.count("/") + 1)]
    excluded = False
    for raw in patterns:
        negate = raw.startswith("!")
        rx = regex(raw[1:] if negate else raw)
        if any(rx.fullmatch(p) for p in prefixes):
            excluded = not negate
    return excluded


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize(
    "path",
    [
        ".env", ".env.production", ".venv/bin/python", ".venv/lib/python3.11/site-packages/x.py",
        ".langgraph_api/.langgraph_ops.pckl", ".hybrid-rag/chroma/chroma.sqlite3",
        "tools/__pycache__/errors.cpython-311.pyc", ".mypy_cache/3.11/x.json",
        ".pytest_cache/v/cache", ".ruff_cache/0.1/x", ".git/config", "checkpoints.sqlite",
        "hybrid_rag.egg-info/PKG-INFO", "tests/test_deploy.py",
    ],
)  # fmt: skip
def test_the_build_context_leaves_out_secrets_state_and_caches(path: str) -> None:
    assert docker_excluded(path, dockerignore()), path


def test_the_build_context_keeps_what_the_image_runs() -> None:
    patterns = dockerignore()
    for path in ("pyproject.toml", "README.md", "langgraph.json", "server/aegra.json", "constraints.txt",
                 "server/graphs.py", "nodes/prepare.py", "web/index.html", "web/vendor/marked.esm.js",
                 "deploy/build-wheel", "tools/kb/search/answerability_params", "prompts/answer.py",
                 "cli/main.py", "deploy/Dockerfile", ".env.example"):  # fmt: skip
        assert not docker_excluded(path, patterns), path
    assert (ROOT / "tools" / "kb" / "search" / "answerability_params").is_dir()


def test_langgraph_dockerfile_adds_the_whole_folder(tmp_path: Path) -> None:
    # Why .dockerignore matters: the generated Dockerfile adds the project folder whole.
    import subprocess
    import sys

    langgraph = Path(sys.executable).parent / "langgraph"
    target = tmp_path / "Dockerfile"
    done = subprocess.run(
        [str(langgraph), "dockerfile", str(target), "--config", str(ROOT / "langgraph.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.search(r"^ADD \. /deps/", target.read_text(encoding="utf-8"), re.MULTILINE)


# --- reproducible installs (constraints.txt, `make lock`) -------------------------------


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_constraints_pin_every_dependency_that_make_and_the_image_install() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    wanted = {_name(r) for r in project["dependencies"]}
    for extra in ("dev", "postgres", "redis", "server", "serve"):
        wanted |= {_name(r) for r in extras[extra]}
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    pins = dict(line.split("==", 1) for line in lines if line and not line.startswith("#"))
    pinned = {name.lower().replace("_", "-") for name in pins}
    assert not wanted - pinned, f"not in constraints.txt (run `make lock`): {wanted - pinned}"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("install", "install-dev"):
        recipe = makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
        assert "-c constraints.txt" in recipe, target
    assert "\nlock:" in makefile and "> constraints.txt" in makefile
