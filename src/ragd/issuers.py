"""Issuers' names as questions and documents write them: the legal form is not part of the name ("The Kraft Heinz
Company" is "kraft heinz"). Shared by identity reading (ingest) and questions that name a document (retrieve)."""

from __future__ import annotations

import re

# the legal forms a company's name ends with
LEGAL_FORMS = (r"(?:Inc|Incorporated|Corporation|Corp|Company|Co|Ltd|Limited|plc|LLC|L\.P|LP|N\.V|S\.A|AG|SE|"
               r"Holdings|Group|Bancorp|Trust)")
_LEGAL = re.compile(rf"[\s,]+{LEGAL_FORMS}\.?$", re.IGNORECASE)


def core_name(name: str) -> str:
    """The issuer's name without its legal form and leading article, lower case: "The Kraft Heinz Company" ->
    "kraft heinz", "AMAZON.COM, INC." -> "amazon.com"."""
    out = name.strip()
    for _ in range(3):
        out = _LEGAL.sub("", out).strip(" ,.")
    out = re.sub(r"^the\s+", "", out, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", out).lower()
