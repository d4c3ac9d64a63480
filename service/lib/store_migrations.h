/* The schema migrations embedded at build time (tools/embed-migrations.sh). */
#ifndef ECOPT_STORE_MIGRATIONS_H
#define ECOPT_STORE_MIGRATIONS_H

struct store_migration {
    int version;          /* NNNN of migrations/NNNN_slug.sql */
    const char *name;     /* "NNNN_slug" */
    const char *sql;
};

extern const struct store_migration store_migrations[];
extern const int store_migration_count;

#endif
