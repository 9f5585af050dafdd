drop
