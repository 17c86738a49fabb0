"""What the model is given: the conversation's messages (history.py), the system prompt
(system_prompt.py), the skills it may read (skills.py), and a long history compressed to fit
(compress.py)."""
