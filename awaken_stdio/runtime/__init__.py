"""The execution core: state store, phases, plugins, tool executors, the agent loop and ``AgentRuntime``."""
