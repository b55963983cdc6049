"""`faithrag serve`: the HTTP API (an ASGI app on FastAPI, run by uvicorn), its OpenAI-compatible
facade, and the inspector page that draws a result's evidence and trace (inspector.html,
shipped as package data). Needs the `server` extra."""

from __future__ import annotations

from faithrag.server.app import create_app
from faithrag.server.runner import FaithragServer
from faithrag.server.service import AskService
from faithrag.server.settings import Limits, ServerSettings

__all__ = ["AskService", "FaithragServer", "Limits", "ServerSettings", "create_app"]
