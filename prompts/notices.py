"""User-facing notices (warnings, reasons appended to answers) in Chinese and English.

English is how the code states them; ``ZH_NOTICES`` rewrites the known ones for an answer
in Chinese (``run.localize.localize``). Each entry: an English pattern (a regular
expression matched at the start of the notice) and its Chinese template; ``{0}``, ``{1}``…
are the pattern's groups, themselves localized (a reason inside a reason).
"""

DEADLINE_EN = "the run deadline ({seconds:g} s, run_timeout_s) was reached"
DEADLINE_SENTENCE_EN = (
    "The run deadline ({seconds:g} s) was reached: this answer uses what was gathered by then, "
    "without the remaining model and web steps."
)
DEADLINE_SENTENCE_ZH = "已到达本次运行的时限（{seconds:g} 秒）：此回答仅依据此前已获取的内容，未执行其余的模型和网络步骤。"
DEADLINE_TOOL_MESSAGE = "Not run: the run deadline was reached."

ZH_NOTICES: tuple[tuple[str, str], ...] = (
    (r"the run deadline \(([\d.]+) s, run_timeout_s\) was reached", "已到达运行时限（{0} 秒，run_timeout_s）"),
    (r"web search not configured: (.+)", "未配置网络搜索：{0}"),
    (r"web search is not configured: (.+)", "未配置网络搜索：{0}"),
    (r"web search is disabled \(search_provider=none\)", "网络搜索已关闭（search_provider=none）"),
    (r"web search is not available on this server", "此服务器未提供网络搜索"),
    (r"web search is not set up — ask your administrator", "网络搜索尚未设置——请联系管理员"),
    (r"web search was skipped by the user", "用户跳过了网络搜索"),
    (r"web search failed: (.+)", "网络搜索失败：{0}"),
    (r"set one of (.+?) \(or use provider 'ddgs' after (.+)\)", "请设置 {0} 之一（或执行 {1} 后使用 ddgs）"),
    (r"no provider selected", "未选择搜索服务"),
    (r"the knowledge base is empty: run 'hybrid-rag ingest PATH'", "知识库为空：请运行 'hybrid-rag ingest PATH'"),
    (r"the knowledge base has no documents yet — ask your administrator", "知识库中还没有文档——请联系管理员"),
    (r"knowledge base unavailable: (.+)", "知识库不可用：{0}"),
    (r"no knowledge base \(collection\) '([^']+)' in (.+?); nothing ingested yet\. 'hybrid-rag ingest PATH --collection ([^']+)' creates it",
     "{1} 中没有知识库（集合）'{0}'，尚未导入任何文档；运行 'hybrid-rag ingest PATH --collection {2}' 即可创建"),
    (r"no knowledge base \(collection\) '([^']+)' in (.+?); existing: (.+?)\. 'hybrid-rag ingest PATH --collection ([^']+)' creates it",
     "{1} 中没有知识库（集合）'{0}'，已有：{2}；运行 'hybrid-rag ingest PATH --collection {3}' 即可创建"),
    (r"no knowledge base \(collection\) '([^']+)' in (.+?); existing: (.+?)\.$", "{1} 中没有知识库（集合）'{0}'，已有：{2}"),
    (r"(\d+) sources left out to fit context_token_budget", "为适应 context_token_budget 省略了 {0} 个来源"),
    (r"answer model call failed \((\w+)\); used extractive answer", "回答模型调用失败（{0}）；改用摘录式回答"),
    (r"model call failed: (.+); the offline rules answer", "模型调用失败：{0}；改由固定规则回答"),
    (r"model call failed: (.+)", "模型调用失败：{0}"),
    (r"agent stopped: (.+); answered extractively from the sources gathered", "智能体已停止：{0}；依据已获取的来源摘录回答"),
    (r"the model call failed", "模型调用失败"),
    (r"the max_model_calls bound \((\d+)\) was reached", "已达到 max_model_calls 上限（{0}）"),
    (r"dropped citation labels that match no source: (.+)", "删除了不对应任何来源的引用标签：{0}"),
    (r"planner output unusable \((.+)\); routed to both(?: sources)?", "规划输出不可用（{0}）；改为同时检索两类来源"),
    (r"document grading output unusable; used relevance scores", "文档评分输出不可用；改用相关性分数"),
    (r"reflection output unusable \((.+)\); used coverage rule", "反思输出不可用（{0}）；改用覆盖规则"),
    (r"llm reranking unusable \((.+)\); kept first-stage order", "LLM 重排序不可用（{0}）；保留初排顺序"),
    (r"cross-lingual: (.+)", "跨语言检索：{0}"),
    (r"the knowledge base also holds (.+) text; no translation was done \(offline mode\), so only the multilingual embedding matches across languages",
     "知识库中还有 {0} 文本；离线模式下未做翻译，仅靠多语言向量跨语言匹配"),
    (r"(\d+) tool call\(s\) not run: max_tool_calls \((\d+)\) reached", "{0} 个工具调用未执行：已达到 max_tool_calls（{1}）"),
    (r"max_tool_calls \((\d+)\) left planned searches out", "max_tool_calls（{0}）限制使部分计划的搜索未执行"),
    (r"answer replaced by the refusal: (.+)", "回答已替换为拒答：{0}"),
    (r"refusal reworded", "拒答的措辞已统一"),
    (r"the answer cites no source", "回答没有引用任何来源"),
    (r"the answer copies the prompt's source markup", "回答照抄了提示中的来源标记"),
    (r"the model gave no answer", "模型没有给出回答"),
    (r"the model judged that no source states the answer", "模型判断没有来源写明答案"),
    (r"sufficiency check failed \((\w+)\); answer kept", "充分性检查失败（{0}）；保留原回答"),
    (r"sufficiency check: the model replied neither yes nor no \((.*)\)", "充分性检查：模型既未回答“是”也未回答“否”（{0}）"),
    (r"only (\d+)% of the answer's terms occur in the sources it cites", "回答中只有 {0}% 的词语出现在它引用的来源中"),
    (r"the model replied with nothing", "模型的回复为空"),
    (r"the max_tool_calls bound \((\d+)\) was reached", "已达到 max_tool_calls 上限（{0}）"),
    (r"the model asked again for a search it had already made", "模型再次要求执行已做过的搜索"),
    (r"(internal_search|google_search): (.+)", "{0}：{1}"),
    (r"Error: (\w+) arguments rejected: (.+)\. Fix them and call again\.", "错误：{0} 的参数被拒绝：{1}"),
    (r"invalid (hl|gl) '(.*)': expected a (?:language|two-letter country) code like .+", "{0} 参数 '{1}' 无效：hl 应为语言代码（如 en、zh-CN），gl 应为两个字母的国家代码（如 us）"),
    (r"web search query is empty", "网络搜索的查询为空"),
    (r"no source mentions the question's key terms \((.+)\): nothing quoted", "没有来源提到问题的关键词（{0}）：未摘录任何内容"),
    (r"web pages not read: (.+)", "未读取网页：{0}"),
    (r"web page not read: (.+)", "未读取网页：{0}"),
)  # fmt: skip
