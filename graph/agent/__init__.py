"""The tool-calling agent (``tool_agent``), in one package.

* ``agent_graph`` — the graph builder: prepare → model loop ⇄ tools → cite → finalize.
* ``model_loop`` — the agent's nodes with a model (``call_model``, ``run_tools``).
* ``tools`` — the two tools as react-agent writes them (signature, docstring, body).
* ``tool_work`` — the tools' work (``internal_search``, ``google_search``) as plain
  functions over the run's ``SearchService``, and the labels of the run's sources.
* ``tool_calls`` — the executor of a step's calls (why not ``ToolNode``: its docstring);
  ``tool_outcomes`` — repeated calls, and the outcomes folded into the state.
* ``offline_loop`` — the agent without a model: a documented rule picks the tools.
"""
