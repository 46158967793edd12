"""The sweep layer, above the launchers: THE loop every command runs through (:mod:`.loop`), the derived columns
added to every stored row (:mod:`.derived`), and the install checked before a run (:mod:`.requirements`)."""
