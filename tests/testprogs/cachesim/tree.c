// Pointer chasing: an unbalanced binary search tree of random keys, one
// malloc per node, searched for random keys.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct node {
	uint64_t key;
	uint64_t value;
	struct node *left, *right;
};

static struct node *tree_insert(struct node *root, uint64_t key, uint64_t value)
{
	struct node **link = &root;
	while (*link) {
		if (key == (*link)->key) {
			(*link)->value = value;
			return root;
		}
		link = key < (*link)->key ? &(*link)->left : &(*link)->right;
	}
	struct node *n = calloc(1, sizeof *n);
	n->key = key;
	n->value = value;
	*link = n;
	return root;
}

static const struct node *tree_find(const struct node *n, uint64_t key)
{
	while (n && n->key != key)
		n = key < n->key ? n->left : n->right;
	return n;
}

static void tree_free(struct node *n)
{
	if (!n)
		return;
	tree_free(n->left);
	tree_free(n->right);
	free(n);
}

static uint64_t rng_state = 88172645463325252ULL;
static uint64_t next_random(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], 0, 10) : 100000;
	struct node *root = 0;
	for (uint64_t i = 0; i < n; i++)
		root = tree_insert(root, next_random() % (n * 4), i);
	uint64_t found = 0;
	for (uint64_t i = 0; i < 4 * n; i++)
		found += tree_find(root, next_random() % (n * 4)) != 0;
	printf("tree: n=%llu found=%llu\n", (unsigned long long)n, (unsigned long long)found);
	tree_free(root);
	return 0;
}
