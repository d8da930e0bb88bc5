"""The base of every wire model: frozen, strict about unknown fields, JSON-first.

Also the constrained scalar types the contracts share, so that a rule such as "ids are non-empty" or
"offsets stay within ±14 h" is spelled once. Constraint failures produce pydantic messages that name the
rule, never the offending value (see :func:`larkbot.canonical.codec.decode`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class WireModel(BaseModel):
    """A frozen, self-validating contract model.

    ``extra="forbid"`` makes a producer/consumer version skew fail loudly at decode time instead of
    silently dropping fields; ``frozen=True`` lets models be shared between tasks without copies and makes
    them hashable (every collection field is a tuple for that reason). ``allow_inf_nan=False`` because a
    NaN would serialize as ``null`` and break the encode → decode → encode identity.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=False,
        str_strip_whitespace=False,
        allow_inf_nan=False,
    )


#: Text that must not be empty (message text, emoji, mime type, reasons).
NonEmptyStr = Annotated[str, Field(min_length=1)]
#: A platform or internal identifier: any non-empty string (Telegram ints travel as decimal strings).
Id = NonEmptyStr
#: Milliseconds since the Unix epoch.
EpochMs = Annotated[int, Field(ge=0)]
#: Seconds since the Unix epoch (platform server time; fractional where the platform has it).
EpochSec = Annotated[float, Field(ge=0)]
#: Local UTC offset in minutes; real offsets span −12:00 … +14:00, so ±14 h bounds both sides.
UtcOffsetMin = Annotated[int, Field(ge=-840, le=840)]
#: A count or size that cannot be negative.
NonNegativeInt = Annotated[int, Field(ge=0)]
