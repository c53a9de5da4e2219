import ragd


def test_public_surface_is_explicit() -> None:
    assert sorted(ragd.__all__) == sorted([
        "Answer", "Block", "Candidate", "Chunk", "ChunkPolicy", "Collection", "Filters", "IngestReport", "Plan", "Ragd",
        "RagdError", "ask", "chunk", "compress", "connect", "fuse", "index", "rerank", "retrieve",
    ])
    for name in ragd.__all__:
        assert getattr(ragd, name) is not None
