/* Hand-made CFI for the unwind table builder's tests
 * (tests/unit/loader/unwind_table_test.cpp): each function is one shape of
 * frame the builder must compile, with a label at each point whose rule the
 * test checks. */
	.text

/* push rbp; mov rbp, rsp: CFA = rbp + 16 in the body. */
	.globl cfi_fp_frame
	.type cfi_fp_frame, @function
cfi_fp_frame:
	.cfi_startproc
	pushq %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq %rsp, %rbp
	.cfi_def_cfa_register %rbp
	.globl cfi_fp_body
cfi_fp_body:
	nop
	nop
	popq %rbp
	.cfi_def_cfa %rsp, 8
	.globl cfi_fp_ret
cfi_fp_ret:
	ret
	.cfi_endproc
	.size cfi_fp_frame, .-cfi_fp_frame

/* sub rsp: CFA = rsp + 8 + 40. */
	.globl cfi_sub_frame
	.type cfi_sub_frame, @function
cfi_sub_frame:
	.cfi_startproc
	subq $40, %rsp
	.cfi_def_cfa_offset 48
	.globl cfi_sub_body
cfi_sub_body:
	nop
	addq $40, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size cfi_sub_frame, .-cfi_sub_frame

/* An early return inside the body: remember_state / restore_state. */
	.globl cfi_remember
	.type cfi_remember, @function
cfi_remember:
	.cfi_startproc
	pushq %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	pushq %rbx
	.cfi_def_cfa_offset 24
	.cfi_offset %rbx, -24
	testq %rdi, %rdi
	je 1f
	.cfi_remember_state
	popq %rbx
	.cfi_def_cfa_offset 16
	popq %rbp
	.cfi_def_cfa_offset 8
	.globl cfi_remember_early_ret
cfi_remember_early_ret:
	ret
1:
	.cfi_restore_state
	.globl cfi_remember_restored
cfi_remember_restored:
	nop
	popq %rbx
	.cfi_def_cfa_offset 16
	popq %rbp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size cfi_remember, .-cfi_remember

/* A CFA given by an expression (DW_CFA_def_cfa_expression:
 * DW_OP_breg7 0; DW_OP_deref): the sampler cannot evaluate it. */
	.globl cfi_expression
	.type cfi_expression, @function
cfi_expression:
	.cfi_startproc
	.cfi_escape 0x0f, 0x03, 0x77, 0x00, 0x06
	.globl cfi_expression_body
cfi_expression_body:
	nop
	ret
	.cfi_endproc
	.size cfi_expression, .-cfi_expression

/* The thread's outermost frame: the return address is undefined. */
	.globl cfi_outermost
	.type cfi_outermost, @function
cfi_outermost:
	.cfi_startproc
	.cfi_undefined %rip
	xorl %ebp, %ebp
	nop
	hlt
	.cfi_endproc
	.size cfi_outermost, .-cfi_outermost

/* No CFI at all (hand-written assembly without directives). */
	.globl cfi_none
	.type cfi_none, @function
cfi_none:
	nop
	ret
	.size cfi_none, .-cfi_none

	.section .note.GNU-stack,"",@progbits
