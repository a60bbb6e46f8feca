"""asyncio decisions: one libdrl async context per event loop.

The context's descriptor is watched with loop.add_reader(); when it is
readable, process() completes the futures of the decisions finished, on
the loop's thread. On memory:// a decision is made at start; on Redis
(tx=auto, tx=lua, one node, plaintext) its commands go out at start on the
context's own connection and the loop's thread reads the replies: no thread
at all. On the other stores the context's worker threads (started only
when needed) or the store's I/O thread finish it. A stalled store never
blocks the loop: the call fails at the store's timeout_ms, handled by the
limiter's on_error= as in C.

A task cancelled while it waits does not cancel the decision (it may have
reached the store): its result is dropped.
"""
import asyncio
import os
import weakref

from . import _drl

_contexts = weakref.WeakKeyDictionary()  # loop -> _Context
_pid = os.getpid()  # this process's, without a system call per decision


def _forked():
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


class _Context:
    """An Async context attached to `loop` in this process."""

    def __init__(self, loop):
        self.pid = _pid
        self.ctx = _drl.Async()
        loop.add_reader(self.ctx.fd(), self.ctx.process)


def _context(loop):
    c = _contexts.get(loop)
    if c is not None and c.pid == _pid:
        return c
    if c is not None:
        # A loop carried across fork (asyncio does not support that
        # either): the parent's context, its workers and its connection
        # are not ours (never freed here: async.c), and its reader sits in
        # the loop's selector, which the parent may still share.
        raise RuntimeError("drl: this event loop was made before fork(); "
                           "make a new loop in the child (asyncio.run)")
    c = _contexts[loop] = _Context(loop)
    return c


def allow(limiter, key, cost=1):
    """Start limiter.allow(key, cost) on the running loop: a future of the
    drl.Result, or of the drl.Error the blocking call would raise. Bad
    input raises here, at once, as the blocking call would."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    _context(loop).ctx.start(limiter, key, cost, fut)
    return fut
