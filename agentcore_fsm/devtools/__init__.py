"""Tools for developers: the testing helpers and event-grammar checker, diagrams, replay."""
