"""Tool-calling agents: Python functions and MCP servers as tools (docs/tools.md).

- `formats`: the model's own tool-call formats (`hermes`, `llama3`): parsing a reply into calls,
  and the system-prompt rendering for chat templates without tool support;
- `functions`: Python-function tools (`module:function`), JSON schema by transformers'
  `get_json_schema`, run on a bounded pool of worker threads with a time limit;
- `mcp_server`: MCP servers over stdio or by URL through the `mcp` SDK, started, restarted when
  dead or hung, stopped; `mcp_stdio`: the SDK's stdio transport with a limit on a line;
- `toolset`: the tools of one env config, by name, with argument checks and error results;
- `limits`: tool results cut to a turn's token budget (docs/tools.md, "Limits").

The env itself is `envs/adapters/tools_env.py` (`env.train.name: tools`); the rollout side
(tools through the chat template's `tools=`, results as `tool` messages, token-exact, and the
metrics) is `rollout/tool_chat.py`. Nothing here imports rollout/ or monitor/, and nothing here is
imported by `import ragen_cli` or `ragen --help`.
"""
