"""Generate: a firmware project for a model on a board, rendered from template_project/."""
