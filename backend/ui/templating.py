"""The dashboard's Jinja2 environment: templates from ``frontend/templates``, the
formatting filters, and block rendering through jinja2-fragments so a fragment
(or an SSE event) is rendered from the same template as the full page."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2_fragments import render_block
from jinja2_fragments.fastapi import Jinja2Blocks

from millstream.backend.ui.format import FILTERS
from millstream.backend.ui.leader_badge import leader_context
from millstream.backend.ui.vertex_metrics import vertex_colour



def _frontend_dir() -> Path:
    """``backend/frontend`` in an installed wheel (setup.py maps it there), else the source tree's ``frontend/``."""
    here = Path(__file__).resolve()
    installed = here.parents[1] / "frontend"
    return installed if installed.is_dir() else here.parents[2] / "frontend"


FRONTEND = _frontend_dir()
TEMPLATES_DIR = FRONTEND / "templates"
STATIC_DIR = FRONTEND / "static"

templates = Jinja2Blocks(directory=str(TEMPLATES_DIR), context_processors=[leader_context])
templates.env.filters.update(FILTERS)
templates.env.globals["colour"] = vertex_colour
templates.env.trim_blocks = True
templates.env.lstrip_blocks = True


def block(name: str, block_name: str, **context: Any) -> str:
    """One block of a template as HTML, for SSE events and tests."""
    return render_block(templates.env, name, block_name, **context)


def is_htmx(request: Any) -> bool:
    """htmx marks its requests; boosted navigations still want the whole page."""
    h = request.headers
    return h.get("hx-request") == "true" and h.get("hx-boosted") != "true" and h.get("hx-history-restore-request") != "true"
