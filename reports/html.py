"""HTML rendering with jinja2 templates from reports/templates/ (autoescaped)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).parent / "templates"


@cache
def _env() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, **context: Any) -> str:
    """Render TEMPLATE (a file in reports/templates/) with CONTEXT."""
    return str(_env().get_template(template).render(**context))
