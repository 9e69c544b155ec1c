/* dlsym: the exported entry, in assembly so that forwarding is a tail jump.
 *
 * glibc resolves dlsym(RTLD_NEXT, ...) relative to its caller's return
 * address. A C wrapper calling the real dlsym would make every RTLD_NEXT
 * lookup in the process start after the shim. Jumping keeps the program's
 * return address on the stack, so the real dlsym sees the real caller.
 * Only names starting with "cu" and a handle other than RTLD_NEXT reach C
 * (vr_dlsym_cu); everything else goes straight to the real dlsym.
 */
#if defined(__x86_64__)
    .text
    .globl dlsym
    .type dlsym, @function
dlsym:
#if defined(__CET__)
    endbr64
#endif
    cmpq $-1, %rdi              /* RTLD_NEXT */
    je .Lforward
    testq %rsi, %rsi
    je .Lforward
    cmpb $0x63, (%rsi)          /* 'c' */
    jne .Lforward
    cmpb $0x75, 1(%rsi)         /* 'u' */
    jne .Lforward
    jmp vr_dlsym_cu
.Lforward:
    movq vr_real_dlsym(%rip), %rax
    testq %rax, %rax
    je .Lresolve
    jmp *%rax
.Lresolve:
    /* First call: find the real dlsym, keeping the arguments. */
    pushq %rdi
    pushq %rsi
    subq $8, %rsp
    call vr_resolve_real_dlsym
    addq $8, %rsp
    popq %rsi
    popq %rdi
    testq %rax, %rax
    je .Lnone
    jmp *%rax
.Lnone:
    xorl %eax, %eax
    ret
    .size dlsym, .-dlsym
#elif defined(__aarch64__)
    .text
    .globl dlsym
    .type dlsym, %function
dlsym:
    cmn x0, #1                  /* RTLD_NEXT */
    b.eq .Lforward
    cbz x1, .Lforward
    ldrb w9, [x1]
    cmp w9, #0x63
    b.ne .Lforward
    ldrb w9, [x1, #1]
    cmp w9, #0x75
    b.ne .Lforward
    b vr_dlsym_cu
.Lforward:
    adrp x9, vr_real_dlsym
    ldr x9, [x9, #:lo12:vr_real_dlsym]
    cbz x9, .Lresolve
    br x9
.Lresolve:
    stp x29, x30, [sp, #-32]!
    stp x0, x1, [sp, #16]
    bl vr_resolve_real_dlsym
    mov x9, x0
    ldp x0, x1, [sp, #16]
    ldp x29, x30, [sp], #32
    cbz x9, .Lnone
    br x9
.Lnone:
    mov x0, #0
    ret
    .size dlsym, .-dlsym
#else
#error "dlsym_stub.S: add the tail-jump stub for this architecture"
#endif
    .section .note.GNU-stack,"",%progbits
