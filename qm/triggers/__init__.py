"""Message Queuing Triggers (reference §9): rules, conditions, actions, and the service."""
