"""A tool module for the ACP tests: tools that ask the person a question while they run (``ctx.elicit``)."""

from awaken_stdio import ToolCallContext, tool


@tool(read_only=True)
async def pick_colour(ctx: ToolCallContext) -> str:
    """Ask which colour to use (a single choice)."""
    schema = {"type": "object", "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}},
              "required": ["colour"]}  # fmt: skip
    answer = await ctx.elicit("Which colour?", schema)
    return f"{answer.action}: {(answer.content or {}).get('colour')}"


@tool(read_only=True)
async def ask_name(ctx: ToolCallContext) -> str:
    """Ask for a name (free text: a form)."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = await ctx.elicit("Your name?", schema)
    return f"{answer.action}: {(answer.content or {}).get('name')}"
