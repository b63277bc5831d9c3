"""Group backoff after a timeout, in the shape of Kueue's requeuingStrategy: base
doubling up to a cap, and an optional retry limit after which the group is Failed."""

from __future__ import annotations

from dataclasses import dataclass

from extender.core.model.config import BackoffPolicy
from extender.core.model.types import GroupInfo
from extender.core.model.vocabulary import GroupRef


@dataclass(slots=True)
class Backoff:
    """Timeouts a gang has had and when it may be tried again."""

    attempts: int = 0
    until: float = 0.0
    failed: bool = False
    group_uid: str = ""


class Backoffs:
    """Every gang's backoff state; a gang with none has never timed out (or started
    over: recreated, re-specified, or bound since)."""

    def __init__(self, policy: BackoffPolicy) -> None:
        self.policy = policy
        self._gangs: dict[str, Backoff] = {}

    def get(self, gang: str) -> Backoff | None:
        return self._gangs.get(gang)

    def blocks(self, gang: str, now: float) -> bool:
        """Whether the gang may not be planned now: Failed, or backing off."""
        bo = self._gangs.get(gang)
        return bo is not None and (bo.failed or bo.until > now)

    def failed(self, gang: str) -> bool:
        bo = self._gangs.get(gang)
        return bo is not None and bo.failed

    def backing_off(self, gang: str, now: float) -> bool:
        bo = self._gangs.get(gang)
        return bo is not None and not bo.failed and bo.until > now

    def any_ended(self, now: float) -> bool:
        """A backoff ran out since the gang was last considered: a pass must run even
        if nothing else changed."""
        return any(not b.failed and 0 < b.until <= now for b in self._gangs.values())

    def ended(self, now: float) -> list[str]:
        """The gangs whose backoff ran out and is not cleared yet."""
        return [k for k, b in self._gangs.items() if not b.failed and 0 < b.until <= now]

    def clear_ended(self, gang: str, now: float) -> None:
        bo = self._gangs.get(gang)
        if bo is not None and bo.until and bo.until <= now and not bo.failed:
            bo.until = 0.0  # backoff over: eligible again

    def timed_out(self, group: GroupRef, now: float) -> Backoff:
        """Count a timeout; the gang backs off, or is Failed at the retry limit."""
        bo = self._gangs.setdefault(group.key, Backoff(group_uid=group.uid))
        bo.attempts += 1
        if self.policy.exhausted(bo.attempts):
            bo.failed, bo.until = True, 0.0  # no end to wait for: nothing to record
        else:
            bo.until = now + self.policy.delay(bo.attempts)
        return bo

    def group_changed(self, old: GroupInfo | None, new: GroupInfo) -> bool:
        """A recreated or re-specified group starts over, its Failed state included;
        returns whether a backoff was dropped."""
        bo = self._gangs.get(new.key)
        if bo is not None and (
            bo.group_uid != new.uid
            or (old is not None and (old.min_member, old.schedule_timeout_seconds)
                != (new.min_member, new.schedule_timeout_seconds))
        ):
            del self._gangs[new.key]
            return True
        return False

    def restore(self, old: GroupInfo | None, new: GroupInfo) -> Backoff | None:
        """Carry on the backoff the group's status records (`requeue_count`), when it
        is news: the group seen for the first time (a restart), or its recorded state
        changed and counts more timeouts than this process knows of (the active
        replica's writes, seen by a standby that may lead next). A state that did not
        change in this event is never taken again: after a re-specification dropped the
        backoff, the status still shows it until the next write. The retry limit is
        this process's, so a limit raised across a restart lets a Failed group go on.
        Returns the backoff taken, or None."""
        count = new.requeue_count
        if count < 1 or (old is not None and old.uid == new.uid
                         and (old.requeue_count, old.requeue_at) == (count, new.requeue_at)):
            return None
        bo = self._gangs.get(new.key)
        if bo is not None and (bo.group_uid != new.uid or bo.attempts >= count):
            return None
        failed = self.policy.exhausted(count)
        bo = self._gangs[new.key] = Backoff(count, 0.0 if failed else new.requeue_at,
                                            failed, new.uid)
        return bo

    def drop(self, gang: str) -> bool:
        """Returns whether the gang had a backoff."""
        return self._gangs.pop(gang, None) is not None

    def view(self, now: float) -> list[dict[str, object]]:
        return [
            {"gang": key, "attempts": b.attempts,
             "secondsLeft": max(0.0, round(b.until - now, 3)), "failed": b.failed}
            for key, b in self._gangs.items() if b.attempts
        ]
