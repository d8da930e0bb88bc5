"""The reminders' pure part: the grammar of ``when`` (:mod:`.when`), the rules (:mod:`.reminders`) and the
tools' declarations (:mod:`.tools`)."""
