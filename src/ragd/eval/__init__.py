"""Retrieval evaluation: datasets, metrics, the runner and its reports."""
