"""Example awaken-stdio tools: a sync tool, an async tool with progress, a pydantic result.

Installed (``pip install ./examples/awaken_weather``), these tools are registered in every agent through the
``awaken_stdio.tools`` entry point; or list ``awaken_weather`` in ``[tools] modules`` instead.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from awaken_stdio import ToolCallContext, ToolFailure, tool

_CITIES = {"paris": (18.5, "cloudy"), "tokyo": (24.0, "sunny"), "oslo": (7.0, "rain")}


class Forecast(BaseModel):
    city: str
    temperature: float
    unit: Literal["celsius", "fahrenheit"]
    sky: str


@tool(kind="fetch", read_only=True)
def forecast(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> Forecast:
    """Today's forecast for a city.

    Args:
        city: The city name, e.g. Paris.
        unit: The temperature unit.
    """
    known = _CITIES.get(city.strip().lower())
    if known is None:
        raise ToolFailure(f"no forecast for {city!r}; known cities: {', '.join(sorted(_CITIES))}", "not_found")
    celsius, sky = known
    temperature = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32, 1)
    return Forecast(city=city.title(), temperature=temperature, unit=unit, sky=sky)


@tool(kind="fetch", read_only=True)
async def compare(
    cities: Annotated[list[str], Field(min_length=2, description="Two or more cities.")], ctx: ToolCallContext
) -> str:
    """Which of the cities is warmest today."""
    readings = []
    for i, city in enumerate(cities):
        await ctx.report_progress("running", f"checking {city} ({i + 1}/{len(cities)})")
        readings.append(forecast(city))
    warmest = max(readings, key=lambda f: f.temperature)
    return f"{warmest.city} is warmest at {warmest.temperature} °C"
