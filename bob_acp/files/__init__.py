"""The project on disk as Bob touches it: a session's folders and the paths in them
(workspace.py), Bob's own folder in a project and the user's state folder (bobdir.py), and
writes that never tear a file (atomic.py) nor follow a link out of a root (beneath.py)."""
