"""The tool-calling agent (``tool_agent``), in one package.

* ``agent_graph`` — the graph builder: prepare → model loop ⇄ tools → cite → finalize.
* ``model_loop`` — the agent's nodes with a model (``call_model``, ``run_tools``).
* ``tool_node`` — the two tools as LangChain tools, and the execution of a step's calls.
* ``tool_work`` — the tools' work (``internal_search``, ``google_search``) as plain
  functions over the run's ``SearchService``.
* ``offline_loop`` — the agent without a model: a documented rule picks the tools.
"""
