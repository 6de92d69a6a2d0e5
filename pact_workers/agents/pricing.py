"""Token prices, and the cost of a call from its token counts.

Prices are USD per million tokens, as the providers publish them; a model that is not
in the table costs what ``pact.yaml`` says (``prices:``) or, failing that, nothing, with
the tokens still recorded. Cache reads and writes are priced separately where the
provider bills them so.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.models.work import Usage


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cache_write_per_mtok: float | None = Field(default=None, ge=0)
    cache_read_per_mtok: float | None = Field(default=None, ge=0)


#: List prices (USD per million tokens) of models a role is likely to use. A model id
#: that is not here prices as the longest entry it starts with: the family entries
#: ("claude-sonnet-4") assume a newer minor version keeps its family's price, which has
#: held so far; set ``prices:`` in pact.yaml when it does not.
PRICES: dict[str, Price] = {
    "claude-sonnet-4": Price(
        input_per_mtok=3.0, output_per_mtok=15.0, cache_write_per_mtok=3.75, cache_read_per_mtok=0.3
    ),
    "claude-haiku-4": Price(
        input_per_mtok=1.0, output_per_mtok=5.0, cache_write_per_mtok=1.25, cache_read_per_mtok=0.1
    ),
    "claude-opus-4-1": Price(
        input_per_mtok=15.0,
        output_per_mtok=75.0,
        cache_write_per_mtok=18.75,
        cache_read_per_mtok=1.5,
    ),
    "claude-sonnet-4-5": Price(
        input_per_mtok=3.0, output_per_mtok=15.0, cache_write_per_mtok=3.75, cache_read_per_mtok=0.3
    ),
    "claude-haiku-4-5": Price(
        input_per_mtok=1.0, output_per_mtok=5.0, cache_write_per_mtok=1.25, cache_read_per_mtok=0.1
    ),
    "gpt-4.1": Price(input_per_mtok=2.0, output_per_mtok=8.0, cache_read_per_mtok=0.5),
    "gpt-4.1-mini": Price(input_per_mtok=0.4, output_per_mtok=1.6, cache_read_per_mtok=0.1),
}


def price_for(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: an override, an exact entry, or the longest matching prefix
    (dated model ids such as ``claude-sonnet-4-5-20250929`` price as their family)."""
    table = {**PRICES, **(overrides or {})}
    if model in table:
        return table[model]
    prefixes = [name for name in table if model.startswith(name)]
    return table[max(prefixes, key=len)] if prefixes else None


def cost_usd(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_write_tokens: int = 0,
    cache_read_tokens: int = 0,
    overrides: Mapping[str, Price] | None = None,
) -> float:
    price = price_for(model, overrides)
    if price is None:
        return 0.0
    write = (
        price.cache_write_per_mtok
        if price.cache_write_per_mtok is not None
        else (price.input_per_mtok)
    )
    read = (
        price.cache_read_per_mtok
        if price.cache_read_per_mtok is not None
        else (price.input_per_mtok)
    )
    return (
        input_tokens * price.input_per_mtok
        + output_tokens * price.output_per_mtok
        + cache_write_tokens * write
        + cache_read_tokens * read
    ) / 1_000_000


def usage_for(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_write_tokens: int = 0,
    cache_read_tokens: int = 0,
    overrides: Mapping[str, Price] | None = None,
) -> Usage:
    """A :class:`Usage` with its cost; cached tokens count as input tokens."""
    return Usage(
        input_tokens=input_tokens + cache_write_tokens + cache_read_tokens,
        output_tokens=output_tokens,
        cost_usd=cost_usd(
            model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_write_tokens=cache_write_tokens,
            cache_read_tokens=cache_read_tokens,
            overrides=overrides,
        ),
    )
