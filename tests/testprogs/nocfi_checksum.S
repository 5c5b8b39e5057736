/* unsigned long nocfi_checksum(const unsigned long *words, unsigned long n,
 *                              unsigned long rounds)
 * Sums words[0 .. n) `rounds` times, rotating the sum by 5 after each word
 * (n > 0, rounds > 0). Hand-written and, like much assembly in the wild,
 * without .cfi directives: no FDE covers it. It keeps a frame pointer. */
	.text
	.globl	nocfi_checksum
	.type	nocfi_checksum, @function
nocfi_checksum:
	push	%rbp
	mov	%rsp, %rbp
	xor	%eax, %eax
1:	mov	%rdi, %r8
	mov	%rsi, %rcx
2:	add	(%r8), %rax
	rol	$5, %rax
	add	$8, %r8
	dec	%rcx
	jnz	2b
	dec	%rdx
	jnz	1b
	pop	%rbp
	ret
	.size	nocfi_checksum, .-nocfi_checksum
	.section .note.GNU-stack,"",@progbits
