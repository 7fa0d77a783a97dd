// Public API of @thinkfl/graders: each part appends one export line for its barrel.
