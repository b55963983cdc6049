"""`faithrag serve`: the HTTP API (faithrag.server.app) and the inspector page that draws a
result's evidence and trace (inspector.html, shipped as package data)."""

from __future__ import annotations

from faithrag.server.app import FaithragServer
from faithrag.server.service import AskService

__all__ = ["AskService", "FaithragServer"]
