"""The soak's invariant checker: :mod:`.checker` (``Checker``, what the run asks), its
watch of every pod and node (:mod:`.pod_watch`), the rules it judges (:mod:`.invariants`),
the records both share (:mod:`.records`) and its own quantity parser (:mod:`.quantity`).
Apart from the driver because it only watches: it never creates, deletes or kills, so a
clean soak is the checker's word against everything the driver did.
"""
