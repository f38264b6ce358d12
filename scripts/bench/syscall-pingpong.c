// What each system-call choice of a small RPC costs on loopback UDP: a ping-pong of 100-byte
// datagrams between a spinning client (CPU 0) and a spinning echo (CPU 1), one socket pair per
// mode, the modes interleaved in blocks of 1,000 round trips (so that the machine's drift hits
// them alike). Prints each mode's round-trip p50 and p10 and the p50 of its send call (µs).
// Build: gcc -O2 -o /tmp/syscall-pingpong scripts/bench/syscall-pingpong.c
// Usage: /tmp/syscall-pingpong MODE... (e.g. 0 1 3 4 36 31); each MODE is a sum of:
//   1   sendmsg with two iovecs (a 60-byte header and the 100 bytes) instead of sendto
//   2   and a TOS control message
//   128 sendmsg with one iovec (header and bytes copied into one buffer)
//   4   recvmmsg of up to 32 datagrams into 64 KB buffers with control buffers, not recvfrom
//   32  (with 4) recvmmsg of one datagram;  64 (with 4) of two
//   8   16 MB socket buffers (SO_RCVBUFFORCE/SO_SNDBUFFORCE: root)
//   16  IP_RECVERR and IP_RECVTOS set
//   512 IP_TOS 0xe0 set on both sockets (the TOS of Homa's priority 7)
//   256 the client's socket connected to the echo's, sending with send() (homa-perf's UDP client)
// docs/runtime-profile.md (eleventh pass) has the figures of the 2-CPU VM.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
static char hdr[60], pay[100];
static long ns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static int mk(int mode,struct sockaddr_in *a){int s=socket(AF_INET,SOCK_DGRAM|SOCK_NONBLOCK,0);a->sin_family=AF_INET;a->sin_port=0;a->sin_addr.s_addr=htonl(0x7f000001);bind(s,(void*)a,sizeof *a);socklen_t l=sizeof *a;getsockname(s,(void*)a,&l);
 int v; if(mode&512){v=0xe0;setsockopt(s,IPPROTO_IP,IP_TOS,&v,4);}
 if(mode&8){v=16<<20;setsockopt(s,SOL_SOCKET,SO_RCVBUFFORCE,&v,4);setsockopt(s,SOL_SOCKET,SO_SNDBUFFORCE,&v,4);}
 if(mode&16){v=1;setsockopt(s,IPPROTO_IP,IP_RECVERR,&v,4);setsockopt(s,IPPROTO_IP,IP_RECVTOS,&v,4);}return s;}
static void snd(int mode,int s,struct sockaddr_in *to){
 if(mode&256&&to==0){send(s,pay,100,0);return;}
 if(!(mode&3)&&!(mode&128)){sendto(s,pay,100,0,(void*)to,sizeof *to);return;}
 if(mode&128){static char one[160];memcpy(one,hdr,60);memcpy(one+60,pay,100);struct iovec io={one,160};struct msghdr m={0};m.msg_name=to;m.msg_namelen=sizeof *to;m.msg_iov=&io;m.msg_iovlen=1;
  union{char b[64];struct cmsghdr a;}cb; if(mode&2){memset(&cb,0,sizeof cb);m.msg_control=cb.b;m.msg_controllen=64;struct cmsghdr*c=CMSG_FIRSTHDR(&m);c->cmsg_level=IPPROTO_IP;c->cmsg_type=IP_TOS;c->cmsg_len=CMSG_LEN(4);*(int*)CMSG_DATA(c)=5<<5;m.msg_controllen=CMSG_SPACE(4);}
  sendmsg(s,&m,MSG_DONTWAIT);return;}
 struct iovec iov[2]={{hdr,60},{pay,100}}; struct msghdr m={0}; m.msg_name=to;m.msg_namelen=sizeof *to;m.msg_iov=iov;m.msg_iovlen=2;
 union{char b[64];struct cmsghdr a;}cb; if(mode&2){memset(&cb,0,sizeof cb);m.msg_control=cb.b;m.msg_controllen=64;struct cmsghdr*c=CMSG_FIRSTHDR(&m);c->cmsg_level=IPPROTO_IP;c->cmsg_type=IP_TOS;c->cmsg_len=CMSG_LEN(4);*(int*)CMSG_DATA(c)=5<<5;m.msg_controllen=CMSG_SPACE(4);}
 sendmsg(s,&m,MSG_DONTWAIT);}
#define B 32
static char (*bufs)[65536]; static struct mmsghdr mm[B]; static struct iovec iv[B]; static char cm[B][64]; static struct sockaddr_in from[B];
static void rcv(int mode,int s){
 if(!(mode&4)){char b[2048];struct sockaddr_in f;socklen_t l=sizeof f;while(recvfrom(s,b,sizeof b,0,(void*)&f,&l)<0){}return;}
 for(;;){for(int i=0;i<B;i++){iv[i].iov_base=bufs[i];iv[i].iov_len=65536;mm[i].msg_hdr=(struct msghdr){&from[i],sizeof from[i],&iv[i],1,cm[i],64,0};}
  if(recvmmsg(s,mm,(mode&32)?1:((mode&64)?2:B),MSG_DONTWAIT,0)>0)return;}}
static int cmp(const void*a,const void*b){long x=*(long*)a,y=*(long*)b;return x<y?-1:x>y;}
int main(int c,char**v){int n=c-1,modes[16];for(int i=0;i<n;i++)modes[i]=atoi(v[i+1]);bufs=calloc(B,65536);
 struct sockaddr_in sa[16],ca[16];int S[16],C[16];for(int i=0;i<n;i++){S[i]=mk(modes[i],&sa[i]);C[i]=mk(modes[i],&ca[i]);if(modes[i]&256)connect(C[i],(void*)&sa[i],sizeof sa[i]);}
 int BL=1000,NB=400*n;
 if(!fork()){pin(1);for(int b=0;b<NB;b++){int k=b%n;for(int i=0;i<BL;i++){rcv(modes[k],S[k]);snd(modes[k],S[k],&ca[k]);}}_exit(0);}
 pin(0);long *lat[16],*sd[16];int cnt[16]={0};for(int i=0;i<n;i++){lat[i]=malloc(8*BL*NB);sd[i]=malloc(8*BL*NB);}
 for(int b=0;b<NB;b++){int k=b%n;for(int i=0;i<BL;i++){long t=ns();snd(modes[k],C[k],(modes[k]&256)?0:&sa[k]);long t2=ns();rcv(modes[k],C[k]);long t3=ns();if(b>=n){lat[k][cnt[k]]=t3-t;sd[k][cnt[k]++]=t2-t;}}}
 wait(0);
 for(int i=0;i<n;i++){qsort(lat[i],cnt[i],8,cmp);qsort(sd[i],cnt[i],8,cmp);printf("mode %2d: rtt p50 %.2f p10 %.2f | send p50 %.2f\n",modes[i],lat[i][cnt[i]/2]/1000.0,lat[i][cnt[i]/10]/1000.0,sd[i][cnt[i]/2]/1000.0);}
 return 0;}
