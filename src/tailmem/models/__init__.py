"""Models with named parameter roles: the GPT of the language-model experiments."""
