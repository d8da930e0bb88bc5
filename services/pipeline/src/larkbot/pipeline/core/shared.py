"""What resident chats share instead of each holding a copy. Pure.

A decoded pydantic model carries its own ``__pydantic_fields_set__``: a set of ~230 bytes or more, for
every ``Content`` and inline node a message keeps (tracemalloc over decoded traffic: ~90 KB of a
200-event chat). Models of the same type with the same fields set share one set here. Safe for the
frozen, ``extra="forbid"`` contract models only (nothing can add to a frozen model's set; ``model_copy``
copies the set before updating it), so anything else is left alone.
"""

from __future__ import annotations

from pydantic import BaseModel

#: (model type, its fields set) → the one set every such model shares; bounded by the contract's types
#: and their combinations of fields.
_FIELDS_SETS: dict[tuple[type[BaseModel], frozenset[str]], set[str]] = {}
#: Whether a model type is a frozen, ``extra="forbid"`` one (looked up once per type).
_SAFE: dict[type[BaseModel], bool] = {}


def share_fields_sets(model: BaseModel) -> None:
    """Point ``model`` and the models it contains (fields and tuples of models) at the shared sets."""
    cls = type(model)
    safe = _SAFE.get(cls)
    if safe is None:
        config = cls.model_config
        safe = _SAFE[cls] = bool(config.get("frozen")) and config.get("extra") == "forbid"
    if not safe:
        return
    own = model.__pydantic_fields_set__
    shared = _FIELDS_SETS.setdefault((cls, frozenset(own)), own)
    if shared is not own:
        object.__setattr__(model, "__pydantic_fields_set__", shared)
    for value in model.__dict__.values():
        if isinstance(value, BaseModel):
            share_fields_sets(value)
        elif type(value) is tuple:
            for item in value:
                if isinstance(item, BaseModel):
                    share_fields_sets(item)
