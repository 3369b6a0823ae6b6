"""Run configuration: one ``Context`` object, passed as the graph's ``context_schema``.

Every field has a default and a description, so LangGraph Studio renders the form.
Values are validated when the object is built (``Context(...)`` raises
:class:`~tools.errors.ConfigError` naming the field), i.e. before any node runs.
Nothing here reads the environment: ``auto`` values are resolved by the nodes at
run time (see ``run.models``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal, get_args

from pydantic import Field

from tools.access.scope import EXPECTED as SCOPE_EXPECTED
from tools.access.scope import PATTERN as SCOPE_PATTERN
from tools.chat_models import validate_model_spec
from tools.errors import ConfigError
from tools.kb.search.rerankers import check_reranker
from tools.kb.store.protocol import validate_collection_name
from tools.settings import DEFAULT_MAX_OUTPUT_TOKENS
from tools.websearch import valid_providers
from tools.websearch.providers import CHOICE_PATTERN, provider_choice_problem
from tools.websearch.snippets import GL_RE, HL_RE


# Model fields carry their kind and the nodes that use them into the JSON schema the
# server publishes, so Studio can present them as model choices next to those nodes.
def _llm(*nodes: str) -> Any:
    return Field(json_schema_extra={"langgraph_type": "llm", "langgraph_nodes": list(nodes)})


def _f(
    default: Any,
    description: str,
    *,
    ge: float | None = None,
    le: float | None = None,
    pattern: str | None = None,
    expected: str = "",
    deployment: bool = False,
) -> Any:
    """A field with its description, bounds and pattern: the one source of both the
    published JSON schema (``minimum``/``maximum``/``pattern``, so Studio's form enforces
    them) and the check below (``expected`` words the pattern for the error message)."""
    metadata: dict[str, Any] = {"description": description}
    if ge is not None:
        metadata["ge"] = ge
    if le is not None:
        metadata["le"] = le
    if pattern is not None:
        metadata["pattern"] = pattern
        metadata["expected"] = expected
    if deployment:  # a server path, host or credential: set by the deployment, not a caller
        metadata["deployment"] = True
    return field(default=default, metadata=metadata)


def _one_of(*alternatives: str) -> str:
    return f"^(?:{'|'.join(alternatives)})$"


_MODEL = _one_of("auto", "offline", r"[A-Za-z0-9_.-]+:\S+")
_MODEL_EXPECTED = "'auto', 'offline' or 'provider:model'"


# Allowed values as a Literal: the published JSON schema lists them (an enum Studio's
# form offers), and the check below reads the same tuple.
AnswerLanguage = Literal["auto", "zh", "en"]


@dataclass(kw_only=True)
class Context:
    """Configuration of one run of either graph."""

    model: Annotated[str, _llm("generate", "call_model")] = _f(
        "auto",
        "Answering model as 'provider:model' (e.g. 'openai:gpt-4o-mini'), 'offline' for the "
        "deterministic no-LLM mode, or 'auto': openai:gpt-4o-mini when OPENAI_API_KEY or "
        "OPENAI_BASE_URL is set, otherwise offline.",
        pattern=_MODEL,
        expected=_MODEL_EXPECTED,
    )
    fast_model: Annotated[str, _llm("route", "rewrite", "rerank", "grade", "reflect")] = _f(
        "auto",
        "Model for routing, rewriting, grading and reflection; same format as 'model'. "
        "'auto' follows 'model'.",
        pattern=_MODEL,
        expected=_MODEL_EXPECTED,
    )
    embedding: str = _f(
        "local",
        "Embedding model: 'local' (bundled, offline) or 'openai:<model>'.",
        pattern=_one_of(r"local(?::\S+)?", r"openai:\S+"),
        expected="'local', 'local:<name>' or 'openai:<model>'",
    )
    collection: str = _f("knowledge", "Chroma collection holding the knowledge base.")
    data_home: str = _f(
        "",
        "Data directory; empty means $HYBRID_RAG_HOME or the default. Per deployment: the "
        "LangGraph server rejects it from API callers.",
        deployment=True,
    )
    chroma_host: str = _f(
        "",
        "Chroma server host; empty means the server's $CHROMA_HOST (and $CHROMA_PORT), "
        "else embedded Chroma in data_home. Per deployment: the LangGraph server rejects it "
        "from API callers.",
        deployment=True,
    )
    chroma_port: int = _f(
        8000,
        "Chroma server port (with chroma_host). Per deployment, like chroma_host.",
        ge=1,
        le=65535,
        deployment=True,
    )
    kb_database_url: str = _f(
        "",
        "PostgreSQL (pgvector) knowledge base, the primary's postgresql:// URL; empty means "
        "the server's $HYBRID_RAG_KB_DATABASE_URL, else Chroma. Per deployment, like "
        "chroma_host.",
        deployment=True,
    )
    kb_read_urls: str = _f(
        "",
        "Comma-separated postgresql:// URLs of the knowledge base's streaming replicas that "
        "serve reads; empty means $HYBRID_RAG_KB_READ_URLS, else the primary. Per "
        "deployment, like chroma_host.",
        deployment=True,
    )
    search_provider: str = _f(
        "auto",
        # The names from the provider table; which are valid is checked when a Context is
        # made (a provider registered after this module was imported is selectable).
        f"Web search provider: a name ({', '.join(valid_providers())}), 'auto' (first one "
        "configured), 'none', or a comma-separated failover list.",
        pattern=CHOICE_PATTERN,
        expected="a provider name or a comma-separated failover list of them",
    )
    search_timeout: float = _f(10.0, "Seconds one web search request may take.", ge=0.1, le=120.0)
    search_max_attempts: int = _f(3, "Attempts per web search, retries included.", ge=1, le=10)
    search_time_budget: float = _f(
        30.0, "Seconds all attempts of one web search may take together.", ge=0.1, le=300.0
    )
    scope: str = _f(
        "",
        "Collection the question is limited to: '' (every document the caller may read), "
        "'folder:<path prefix>', 'source:<source id>' ('source:upload' for uploaded "
        "documents, 'source:cli' for ingested ones) or 'set:<name>' (a named set of "
        "documents, /kb/collections). Both graphs, the agent's internal_search and MCP "
        "honour it; it only narrows what the caller may read.",
        pattern=SCOPE_PATTERN,
        expected=SCOPE_EXPECTED,
    )
    approve_web_search: bool = _f(
        False,
        "Ask a person before each paid web search (both graphs): the run pauses with the "
        "queries, provider and estimated cost and continues when resumed with approve, edit "
        "(new queries) or skip. Needs a checkpointer (server threads have one); nothing is "
        "asked when web search is not configured.",
    )
    hl: str = _f(
        "auto",
        "Search interface language (e.g. 'en', 'zh-CN'); 'auto' by question.",
        pattern=_one_of("auto", HL_RE.pattern[1:-1]),
        expected="'auto' or a language code like 'en' or 'zh-CN'",
    )
    gl: str = _f(
        "auto",
        "Search country (e.g. 'us', 'cn'); 'auto' by question language.",
        pattern=_one_of("auto", GL_RE.pattern[1:-1]),
        expected="'auto' or a two-letter country code",
    )
    top_k_internal: int = _f(5, "Knowledge-base sources kept for the answer.", ge=1, le=20)
    top_k_web: int = _f(5, "Web sources kept for the answer.", ge=1, le=20)
    read_pages: int = _f(
        0,
        "Top web results whose pages are fetched (public http/https hosts only, robots.txt "
        "respected, time and size bounded) and read: their best passages, ranked against the "
        "question, come before their snippets (raise snippet_chars to show more of them). "
        "0: snippets only.",
        ge=0,
        le=5,
    )
    snippet_chars: int = _f(
        280, "Characters of each web snippet shown to the answer step.", ge=50, le=4000
    )
    answer_source_chars: int = _f(
        1200,
        "Characters of each knowledge-base passage a model reads (answer, agent results): "
        "the lines that match the question, whole (a table row with its header), and "
        "what surrounds them, within context_token_budget.",
        ge=100,
        le=8000,
    )
    small_model: bool = _f(
        False,
        "A small model on a CPU (about 0.5-3B parameters, llama.cpp or Ollama): fewer, "
        "shorter calls. No plan when the knowledge-base probe reaches confidence_threshold "
        "(the offline rule routes, the offline rewrites are the queries), no model grading "
        "(the calibrated scores decide), reflection by the coverage rule; the agent's first "
        "search is the question, made without a call (docs/DEPLOYMENT.md, section 7).",
    )
    confidence_threshold: float = _f(
        0.3,
        "Calibrated probability that the knowledge base answers (0.3 = 30 %) below which the "
        "web is searched as a fallback and the offline answer declines.",
        ge=0.0,
        le=1.0,
    )
    refusal_threshold: float = _f(
        0.2,
        "Offline (no-LLM) answers: calibrated probability that the knowledge base answers "
        "below which the extractive answer declines ('No relevant information found') "
        "instead of quoting. Lower keeps more right answers, higher refuses more "
        "unanswerable questions (bench/README.md, 'Rejection').",
        ge=0.0,
        le=1.0,
    )
    max_iterations: int = _f(2, "Re-retrieval rounds after the first retrieval.", ge=0, le=5)
    num_rewrites: int = _f(
        3, "Extra knowledge-base queries besides the original question.", ge=0, le=6
    )
    embed_every_query: bool = _f(
        False,
        "Embed every knowledge-base query. Off: a query made only of the question's words "
        "(keyword variants, follow-up terms) is searched with the question's vector (its BM25 "
        "side still differs), saving one embedding (~30 ms offline) per such query.",
    )
    context_token_budget: int = _f(
        6000,
        "Token budget of the answer prompt: system, history, sources and answer reserve.",
        ge=1000,
        le=200000,
    )
    answer_reserve_tokens: int = _f(
        1024, "Tokens reserved for the answer within the budget.", ge=64, le=32000
    )
    # _f returns dataclasses.field(); ruff cannot see that through the Literal alias.
    answer_language: AnswerLanguage = _f(  # noqa: RUF009
        "auto", "'zh', 'en', or 'auto' (the question's language)."
    )
    max_question_chars: int = _f(4000, "Longest question accepted (characters).", ge=10, le=100000)
    reranker: str = _f(
        "auto",
        "Second-stage reranker: 'auto' (lexical in offline mode, where it measurably helps; "
        "none with a model), 'none', 'lexical' (no model), 'cross-encoder:<model>' "
        "(local sentence-transformers model) or 'llm' (listwise by fast_model).",
        pattern=_one_of("auto", "none", "lexical", "llm", r"cross-encoder(?::\S+)?"),
        expected="auto, none, lexical, llm or cross-encoder:<model>",
    )
    rerank_top_n: int = _f(10, "Candidates kept after reranking.", ge=1, le=50)
    joint_ranking: bool = _f(
        False, "Rank knowledge-base and web candidates together and keep the best rerank_top_n."
    )
    crosslingual: bool = _f(
        True,
        "Add a translated query when the knowledge base holds another language than the "
        "question (needs a model; offline mode says no translation was done).",
    )
    max_output_tokens: int = _f(
        DEFAULT_MAX_OUTPUT_TOKENS,
        "Most tokens a model may write in one call (the request's max_tokens): every model "
        "call (plan, grading, translation, answer, agent turn) stops there, so a model that "
        "never stops costs tokens, not the whole model timeout.",
        ge=16,
        le=32000,
    )
    max_model_calls: int = _f(8, "Agent graph: most model calls per run.", ge=1, le=50)
    max_tool_calls: int = _f(8, "Agent graph: most tool calls per run.", ge=0, le=50)
    run_timeout_s: float = _f(
        90.0,
        "Seconds one run may take: past it the remaining steps skip the models and the web "
        "and the run answers from what it has gathered, saying so.",
        ge=1.0,
        le=3600.0,
    )

    def __post_init__(self) -> None:
        # Types first (JSON clients send 5.0 for 5, CLI users "true"), then values.
        for f in fields(self):
            _check_type(self, f.name, str(f.type))
        for f in fields(self):
            if "ge" in f.metadata or "le" in f.metadata:
                _range(
                    self, f.name, f.metadata.get("ge", -math.inf), f.metadata.get("le", math.inf)
                )
        for f in fields(self):
            if "pattern" in f.metadata and not re.match(
                f.metadata["pattern"], getattr(self, f.name)
            ):
                raise ConfigError(
                    f"{f.name} must be {f.metadata['expected']}, got {getattr(self, f.name)!r}"
                )
        for name in ("model", "fast_model"):
            validate_model_spec(name, getattr(self, name))
        problem = provider_choice_problem(self.search_provider)
        if problem:
            raise ConfigError(f"search_provider must be {problem}, got {self.search_provider!r}")
        if self.answer_reserve_tokens >= self.context_token_budget // 2:
            raise ConfigError(
                "answer_reserve_tokens must be less than half of context_token_budget "
                f"({self.answer_reserve_tokens} >= {self.context_token_budget // 2})"
            )
        allowed = get_args(AnswerLanguage)
        if self.answer_language not in allowed:
            raise ConfigError(
                f"answer_language must be {', '.join(allowed[:-1])} or {allowed[-1]}, "
                f"got {self.answer_language!r}"
            )
        check_reranker(self.reranker)  # names what to install; loads nothing (prepare does)
        validate_collection_name(self.collection)

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> Context:
        """Build from a plain dict (CLI, SDK), naming unknown fields in the error."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown context field(s): {', '.join(unknown)}")
        return cls(**values)


def field_bound(name: str, bound: Literal["ge", "le"]) -> float:
    """A field's published lower (``ge``) or upper (``le``) bound: the one source of it."""
    for f in fields(Context):
        if f.name == name and bound in f.metadata:
            return float(f.metadata[bound])
    raise KeyError(f"Context.{name} has no {bound} bound")


def _check_type(ctx: Context, name: str, annotation: str) -> None:
    """Check (and normalise) one field against its annotation: str, bool, int or float."""
    value = getattr(ctx, name)
    kind = annotation if annotation in ("bool", "int", "float") else "str"
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{name} must be a string, got {type(value).__name__} {value!r}")
    elif kind == "bool":
        if not isinstance(value, bool):  # the string "false" is not False
            raise ConfigError(f"{name} must be true or false, got {value!r}")
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    elif kind == "int":
        if not float(value).is_integer():
            raise ConfigError(f"{name} must be a whole number, got {value!r}")
        setattr(ctx, name, int(value))  # 5.0 from a JSON client is 5
    else:
        setattr(ctx, name, float(value))


def _range(ctx: Context, name: str, low: float, high: float) -> None:
    value = getattr(ctx, name)
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {value!r}")
