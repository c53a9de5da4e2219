"""One router per resource group; `create_app` includes them in this order."""

from __future__ import annotations

from fastapi import APIRouter

from . import answers, collections, documents, library, ops, runs, search

ROUTERS: tuple[APIRouter, ...] = (ops.router, answers.router, search.router, documents.router, runs.router,
                                  collections.router, library.router)
