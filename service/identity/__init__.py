"""The entity resolution gate: is a newly written entity one the user's graph already holds? (docs/identity.md)

Pure scoring, no I/O. The graph store fetches the candidates (same user, same group, by index) and applies the
decision. For one new surface form and one candidate:

- `exact` is 1.0 when the two names, or the new name and one of the candidate's aliases, have the same *key*
  (accents dropped, case-folded, separators - _ . ' / and whitespace removed: "Type Script" = "TypeScript";
  "+" and "#" stay, so "C" is not "C++"; letters written in ASCII count as the same: "Søren" = "Soren"), or when
  the technology lexicon of the offline extractor names both as spellings of one canonical name ("k8s" and
  "Kubernetes");
- `fuzzy` is RapidFuzz's normalised Indel similarity (`fuzz.ratio`) of the keys;
- `semantic` is the cosine of the two names' embeddings (the service's embedder);
- `variant` is `VARIANT_SCORE` for a *known shape* of one name as another that string and embedding similarity
  miss (an acronym, a brand prefix, a version suffix, a nickname of the given name...). It only ever proposes (it
  sits in the review band), it never merges on its own.
- `conflict` is evidence that the names are two things: people whose parsed parts disagree ("Emma Hart" /
  "Emily Hart"), two versions of one product ("Python 2" / "Python 3"), two different terms of the lexicon ("Java"
  / "JavaScript"). A conflict keeps the pair apart (create).

Precision first, a wrong merge joins two people's facts: a pair with a generic type (thing, concept, none) never
merges, nor do people whose names are not spelled the same. Types of different families never match; a generic
type matches any. A pair a reviewer rejected is never proposed again.

Modules, by responsibility:
- `names`: type families, keys, words, the lexicon's canonical names;
- `people`: people's names by parts, nicknames and diminutives (`diminutives.txt`), transliterations;
- `products`: versions and editions, release names, prefixes, short forms, acronyms with symbols, abbreviations;
- `places`: other names of one city (GeoNames, `city_names.txt`);
- `shapes`: the candidate rules per family (`variant`, `conflict`);
- `roles`: what a memory says an entity is ("John Smith, the plumber"), which tells two things of one name apart;
- `gate`: the signals, the score and the decision per family (`Signals`, `Band`, `ResolutionGate`);
- `rules`: what the graph store is handed (`NameRules`, `NameVectors`).
"""
