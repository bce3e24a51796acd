"""Planning: the cost model that picks a backend per stage, and the cardinality sketch it reads."""
