"""Label selectors on tasks and actors: Ray's ``label_selector`` option and
``NodeLabelSchedulingStrategy``, in the wire form the GCS matches against node labels
(``SchedulingStrategy.label_selector`` / ``soft_label_selector``: label key → expression).

The expressions are Ray's string syntax (``"a"``, ``"in(a,b)"``, ``"!a"``, ``"!in(a,b)"``);
NodeLabelSchedulingStrategy's ``Exists`` and ``DoesNotExist``, which that syntax cannot say,
travel as ``"exists()"`` and ``"!exists()"``. The GCS checks the syntax (one rule, the one
placement-group bundle selectors use) and refuses a malformed selector naming the key.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple


def check_label_selector(selector: Any) -> Dict[str, str]:
    """The ``label_selector`` option: a dict of label key → expression, both str."""
    if selector is None:
        return {}
    if not isinstance(selector, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
        raise ValueError(
            "The option 'label_selector' must be a dict of str to str, "
            f'e.g. {{"ray.io/accelerator-type": "in(A100,H100)"}}, got {selector!r}'
        )
    return dict(selector)


def _expression(operator: Any) -> str:
    from raygo.util.scheduling_strategies import DoesNotExist, Exists, In, NotIn

    if isinstance(operator, Exists):
        return "exists()"
    if isinstance(operator, DoesNotExist):
        return "!exists()"
    values: List[str] = list(operator.values)
    body = values[0] if len(values) == 1 else "in(" + ",".join(values) + ")"
    if isinstance(operator, NotIn):
        return "!" + body
    assert isinstance(operator, In)
    return body


def node_label_selectors(strategy: Any) -> Tuple[Dict[str, str], Dict[str, str]]:
    """A NodeLabelSchedulingStrategy's hard and soft selectors in the wire form."""
    return ({key: _expression(op) for key, op in strategy.hard}, {key: _expression(op) for key, op in strategy.soft})


def add_label_selector(wire: Any, selector: Optional[Dict[str, str]]) -> Any:
    """Adds the ``label_selector`` option to a wire SchedulingStrategy (hard, as Ray's);
    a key the strategy's own hard selector also names is refused."""
    if not selector:
        return wire
    both = sorted(set(selector) & set(wire.label_selector))
    if both:
        raise ValueError(f"The option 'label_selector' and NodeLabelSchedulingStrategy's hard selector both name {both}")
    wire.label_selector.update(selector)
    return wire


__all__ = ["check_label_selector", "node_label_selectors", "add_label_selector"]
