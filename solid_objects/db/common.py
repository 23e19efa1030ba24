"""The variant of each protocol step a database runs unless its dialect names another: the
statements that read the same on every database, and the separate-statement forms MySQL and
SQLite share (PostgreSQL folds those into CTEs, see ``postgresql.py``)."""

from __future__ import annotations

from . import batches, claims, instances, leases, mailbox, processes
from . import fence as fenced_commit
from .dialect import Dialect


class CommonDialect(Dialect):
    """A dialect running the common variant of every step (a vendor class overrides some)."""

    claim_moves_in_place = True

    # enqueue
    insert_message = mailbox.insert_message
    mailbox_length = mailbox.mailbox_length
    find_message_by_key = mailbox.find_message_by_key
    find_message_by_request_id = mailbox.find_message_by_request_id
    find_messages_by_keys = mailbox.find_messages_by_keys
    append_messages = mailbox.append_messages
    append_message = mailbox.append_message
    # finding work, leases
    due_instances = leases.due_instances
    others_due = leases.others_due
    hold_lease = leases.hold_lease
    renew = leases.renew
    release = leases.release
    has_due = leases.has_due
    load_state = leases.load_state
    # claims
    claim_next = claims.claim_next
    claim_and_read_ahead = claims.claim_and_read_ahead
    prefetch = claims.prefetch
    stale_claim = claims.stale_claim
    own_claim = claims.own_claim
    unclaim_to_ready = claims.unclaim_to_ready
    set_attempts = claims.set_attempts
    uncount_attempt = claims.uncount_attempt
    # several actors at once
    claim_batch = batches.claim_batch
    commit_batch = batches.commit_batch
    # the fenced commit and what a turn staged
    fence = fenced_commit.fence
    commit_and_claim_next = fenced_commit.commit_and_claim_next
    complete = fenced_commit.complete
    record_failure = fenced_commit.record_failure
    dead_letter = fenced_commit.dead_letter
    yield_head = fenced_commit.yield_head
    insert_effects = fenced_commit.insert_effects
    cancel_reminder = fenced_commit.cancel_reminder
    upsert_reminder = fenced_commit.upsert_reminder
    insert_broadcasts = fenced_commit.insert_broadcasts
    # the process registry
    insert_process = processes.insert_process
    heartbeat_process = processes.heartbeat_process
    heartbeat_processes = processes.heartbeat_processes
    mark_process_stopped = processes.mark_process_stopped
    silent_processes = processes.silent_processes
    claims_without_lease = processes.claims_without_lease
    instances_held_by = processes.instances_held_by
    release_instance_held_by = processes.release_instance_held_by
    release_outbox_claims = processes.release_outbox_claims
    # references
    committed_state = instances.committed_state
    destroy_instance = instances.destroy_instance
    message_outcome = instances.message_outcome
